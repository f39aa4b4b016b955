"""DGL through the project's shim works on torch 2.13 (no GraphBolt library)."""
import subprocess
import sys

import pytest
import torch

from simulator.dgl_compat import dgl, dglnn


@pytest.mark.parametrize("make_conv", [
    lambda: dglnn.GraphConv(4, 5), lambda: dglnn.SAGEConv(4, 5, "mean"),
    lambda: dglnn.GATConv(4, 5, num_heads=2), lambda: dglnn.ChebConv(4, 5, 2),
], ids=["GraphConv", "SAGEConv", "GATConv", "ChebConv"])
def test_conv_forward_backward_batch_and_readout(make_conv):
    torch.manual_seed(0)
    graphs = [dgl.add_self_loop(dgl.graph(([0, 1, 2], [1, 2, 0]), num_nodes=3)),
              dgl.add_self_loop(dgl.graph(([0, 1], [1, 0]), num_nodes=2))]
    batch = dgl.batch(graphs)
    x = torch.randn(batch.num_nodes(), 4, requires_grad=True)
    conv = make_conv()
    kwargs = {"lambda_max": [2.0] * 2} if isinstance(conv, dglnn.ChebConv) else {}
    h = conv(batch, x, **kwargs).reshape(batch.num_nodes(), -1)
    batch.ndata["h"] = h
    pooled = dgl.mean_nodes(batch, "h")
    assert pooled.shape[0] == 2
    pooled.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert all(p.grad is not None for p in conv.parameters())


def test_save_and_load_graphs(tmp_path):
    g = dgl.graph(([0, 1], [1, 2]), num_nodes=3)
    g.ndata["x"] = torch.arange(3.0)
    dgl.save_graphs(str(tmp_path / "g.bin"), [g])
    (loaded,), _ = dgl.load_graphs(str(tmp_path / "g.bin"))
    assert torch.equal(loaded.ndata["x"], g.ndata["x"])


def test_plain_import_is_what_the_shim_works_around():
    """Without the shim dgl 2.1 fails on this torch; if this ever passes, drop the shim."""
    code = "import dgl"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if result.returncode == 0:
        pytest.skip("plain `import dgl` works here (a torch/dgl pair with GraphBolt)")
    assert "graphbolt" in result.stderr.lower()


def test_shim_recovers_after_a_failed_plain_import():
    code = ("try:\n    import dgl\nexcept Exception:\n    pass\n"
            "from simulator.dgl_compat import dgl\n"
            "g = dgl.batch([dgl.graph(([0], [1]))])\nprint(g.num_nodes(), dgl.utils is not None)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["2", "True"]
