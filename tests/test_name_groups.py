"""Range names that differ only in emit_nvtx's / FSDP's ids are classified once per group
(timeline/name_groups.py): every classifier the rules run through classify_categorical and
name_mask answers each name of the 2-GPU H100 slice (16,600 names, each with its op_id) and of
emit_nvtx names with sizes exactly as when asked name by name."""
from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pytest
from conftest import BUNDLED

import tracelint
from tracelint.importers import nsys_host
from tracelint.timeline import classify, compile_names, name_groups

CLASSIFIERS = [classify.kernel_class, classify.api_role, classify.blocks_host, classify.sync_kind,
               classify.optimizer_region, classify.op_tensor_scope, classify.is_host_readback_op,
               classify.is_profiler_step, classify.model_op, classify.data_parallel_op,
               classify.dataloader_iter, classify.device_move_op, classify.factory_op,
               classify.emit_nvtx_op, classify.has_emit_nvtx_ids, classify.framework_op_name,
               classify.nvtx_op_sizes, compile_names.torch_compile_role,
               compile_names.is_dynamo_wrapper, compile_names.compile_id, nsys_host._step_number]


def _emit_nvtx_names(n: int) -> list[str]:
    ops = ["aten::conv2d", "aten::to", "aten::add_", "aten::zeros", "Optimizer.step#AdamW.step",
           "ProfilerStep#3", "aten::_foreach_add_"]
    return [f"{ops[i % len(ops)]}, seq = {i}, op_id = {i + 7}, sizes = [[{i % 5}, 3], [8]], "
            f"input_op_ids = [({i},0), ({i + 1},1)]" if i % 3 else f"{ops[i % len(ops)]}, op_id = {i}"
            for i in range(n)]


@pytest.fixture(scope="module")
def range_names() -> pd.Index:
    tl = tracelint.load(BUNDLED / "nsys" / "nsys2026.2_nsys-ai-pytorch-2gpu-1s-slice_h100.sqlite")
    cats = tl.ranges["name"].array.categories
    assert len(cats) >= name_groups.GROUP_AT_LEAST
    return cats


@pytest.mark.parametrize("fn", CLASSIFIERS, ids=lambda f: f.__name__)
def test_grouped_answers_equal_name_by_name(fn, range_names):
    steps = ["ProfilerStep#7", "iteration 12", " step_3 ", "ProfilerStep#7, op_id = 9"]
    for cats in (range_names, pd.Index(_emit_nvtx_names(3000)),
                 pd.Index(_emit_nvtx_names(3000) + steps)):
        assert name_groups.per_category(cats, fn) == [fn(str(c)) for c in cats.tolist()]


def test_groups_are_few_and_remembered_per_index(range_names):
    group, heads = name_groups._groups(range_names)
    assert len(heads) * 10 < len(range_names)           # 16,600 names, a few hundred ops
    names = range_names.tolist()
    assert heads == [names[i] for i in np.unique(group, return_index=True)[1]]
    again = name_groups._groups(range_names)            # from the cache
    assert again[0] is group and again[1] is heads
    other = pd.Index([f"op{i}, op_id = {i}" for i in range(2500)])
    assert len(name_groups._groups(other)[1]) == 2500   # no two alike
    del other
    gc.collect()


def test_a_few_names_are_asked_one_by_one():
    calls = []
    cats = pd.Index([f"aten::to, op_id = {i}" for i in range(10)])
    name_groups.per_category(cats, lambda n: calls.append(n))
    assert len(calls) == 10


def test_categories_that_are_not_text_are_asked_as_text():
    for cats in (pd.Index(range(3000)), pd.Index([f"k{i}" for i in range(2999)] + [7])):
        assert name_groups.per_category(cats, repr) == [repr(str(c)) for c in cats.tolist()]
