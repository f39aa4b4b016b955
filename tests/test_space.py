"""Config spaces: AutoTVM's enumeration order and index ↔ knob-values round trips."""
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from extract.autotvm.space import ConfigSpace, OptionKnob, SplitKnob, factors
from extract.autotvm.templates import get_template
from extract.tir.workloads import RESNET18, parse_workload


def test_factors():
    assert factors(12) == [1, 2, 3, 4, 6, 12]
    assert factors(7) == [1, 7]


def test_split_follows_autotvm_dfs_order():
    # AutoTVM: DFS over ascending factors, the last output innermost, first entry -1
    knob = SplitKnob("tile", 8, 3)
    assert knob.options[:4] == [[-1, 1, 1], [-1, 2, 1], [-1, 4, 1], [-1, 8, 1]]
    assert [-1, 2, 4] in knob.options and [-1, 4, 4] not in knob.options
    assert len(knob) == 10  # ordered factorisations of 8 into 3 parts
    assert knob.sizes([-1, 2, 2]) == [2, 2, 2]


def test_mixed_radix_first_knob_fastest():
    space = ConfigSpace([OptionKnob("a", [0, 1]), OptionKnob("b", ["x", "y", "z"])])
    assert len(space) == 6
    assert space.get(1).values == {"a": 1, "b": "x"}
    assert space.get(2).values == {"a": 0, "b": "y"}


@pytest.mark.parametrize("name", ["C1", "C3", "C7", "C12"])
def test_index_round_trip(name):
    template = get_template("conv2d_NCHWc.x86")
    space = template.space(RESNET18[name])
    rng = np.random.default_rng(0)
    for index in rng.choice(len(space), size=50, replace=False):
        config = space.get(int(index))
        assert space.index_of(config.values) == index
        again = space.from_entity(space.to_entity(config))
        assert again.index == index and again.values == config.values


def test_resnet18_spaces_hold_500_configs():
    template = get_template("conv2d_NCHWc.x86")
    sizes = {name: len(template.space(wl)) for name, wl in RESNET18.items()}
    assert min(sizes.values()) >= 500, sizes
    # C2: 7 ic splits × 7 oc × 8 ow (inner ≤ 64) × unroll_kw 2 × tile_oh 2 × unroll_ow 2
    assert sizes["C2"] == 7 * 7 * 8 * 2 * 2 * 2


def test_old_log_entity_takes_autotvm_defaults():
    template = get_template("topi_nn_conv2d")
    wl = RESNET18["C2"]
    entity = [["tile_ic", "sp", [4, 16]], ["tile_oc", "sp", [-1, 16]],
              ["tile_ow", "sp", [-1, 8]], ["unroll_kw", "ot", True]]
    config = template.space(wl).from_entity(entity, template.default_values(wl))
    assert config["tile_ic"] == [-1, 16]  # the spelled-out outer factor is normalised
    assert config["tile_oh"] == 1 and config["unroll_ow"] is True


def test_entity_with_foreign_knob_is_a_clear_error():
    space = get_template("conv2d_NCHWc.x86").space(RESNET18["C2"])
    with pytest.raises(ValueError, match="tile_zz"):
        space.from_entity([["tile_zz", "sp", [-1, 2]]])
    entity = space.to_entity(space.get(0))
    entity[0] = ["tile_ic", "sp", [-1, 5]]  # 5 does not divide 64
    with pytest.raises(ValueError, match="not in its space"):
        space.from_entity(entity)
    with pytest.raises(ValueError, match="lacks knobs"):
        space.from_entity(entity[:2])


def test_workload_names():
    assert parse_workload("C2") == RESNET18["C2"]
    assert parse_workload("1x64x56x56_64x3x3_s1_p1") == RESNET18["C2"]
    assert parse_workload(RESNET18["C5"].key) == RESNET18["C5"]
    with pytest.raises(ValueError, match="unknown workload"):
        parse_workload("resnet")


# ---------------------------------------------------------------- any entity value
_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-100, 600) | st.floats() | st.text(max_size=4),
                       lambda inner: st.lists(inner, max_size=4), max_leaves=6)


@settings(max_examples=200, deadline=None)
@example(knob=4, value=2.0, kind=None).via("a float for tile_oh's 2")
@example(knob=3, value=1, kind=None).via("1 for unroll_kw's true")
@example(knob=0, value=[4, 16], kind=None).via("a spelled-out split")
@given(knob=st.integers(0, 5), value=_VALUES, kind=st.sampled_from(["sp", "ot", "re", None]))
def test_any_entity_value_is_a_config_of_the_space_or_a_value_error(knob, value, kind):
    """What a log's entity holds is a config of the space, or a ValueError naming the knob:
    never a TypeError, and never a value of another JSON type taken for an option."""
    space = get_template("conv2d_NCHWc.x86").space(RESNET18["C2"])
    entity = space.to_entity(space.get(1234))
    name, true_kind, _ = entity[knob]
    entity[knob] = [name, kind or true_kind, value]
    try:
        config = space.from_entity(entity)
    except ValueError as e:
        assert repr(name) in str(e)
        return
    assert space.get(config.index) == config and kind in (None, true_kind)
    option = config[name]
    assert type(option) is type(value) or (isinstance(value, list) and value[0] != -1)


@pytest.mark.parametrize("value, message", [
    (None, "is not a list of integers"), ([-1, True], "is not a list of integers"),
    ([-1, 2.0], "is not a list of integers"), ([-1, 2, 2], "3 factors"),
    ([3, 16], "multiply to 48, not the extent 64"), ([-1, 0], "not in its space"),
])
def test_bad_split_values(value, message):
    space = get_template("conv2d_NCHWc.x86").space(RESNET18["C2"])
    entity = space.to_entity(space.get(0))
    entity[0] = ["tile_ic", "sp", value]
    with pytest.raises(ValueError, match=message):
        space.from_entity(entity)
