"""AutoTVM: tuning-log records, conv2d templates and their knob spaces, knob and itervar
features, measuring on this CPU or through TVM's RPC tracker."""
