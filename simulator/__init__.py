"""Runtime simulator: a GNN (encode → propagate → pool → predict) over program graphs.

CLIs: `python -m simulator.train`, `simulator.evaluate`, `simulator.predict`; see
simulator/README.md. From Python, the cost-model interface (`simulator.models.costmodel`:
`build_cost_model`, `CostModel.fit/update/predict/save/load`) and the data sources
(`simulator.data.sources`). Import dgl only through `simulator.dgl_compat`.

Below: the registration lists, one per kind of plug-in. A plug-in registers itself by
name in its kind's registry, which its interface module holds; an interface imports no
implementation. Every module holding implementations is imported here, once, so that
importing any part of `simulator` registers them all. A new plug-in is one new file plus
one line in its kind's list (docs/ARCHITECTURE.md, "Adding a plug-in").
"""
# propagation layers and poolings: @register_propagation, @register_pooling (simulator.models.layers)
from .models import layers  # noqa: F401

# losses: @register_loss (simulator.losses)
from . import losses  # noqa: F401

# metrics: @register_metric (simulator.metrics)
from . import metrics  # noqa: F401

# splits: @register_split (simulator.data.splits)
from .data import splits  # noqa: F401

# cost models: @register_cost_model (simulator.models.costmodel); each propagation layer is also one
from .models import curve_mlp  # noqa: F401
from .models import xgb  # noqa: F401
from .models import autotvm_xgb  # noqa: F401
from .models import invariant  # noqa: F401
from .models import segsum_mlp  # noqa: F401
from .models import tlp  # noqa: F401
from .models import config_mlp  # noqa: F401
from .models import layout_sum  # noqa: F401

# data kinds: @register_data_kind (simulator.data.sources)
from .data import in_memory  # noqa: F401
from .data import tpugraphs  # noqa: F401
