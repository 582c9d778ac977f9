"""TL034 conv-bias-before-batchnorm."""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from tracelint.engine.finding import Evidence, Layer, Measure, Severity
from tracelint.engine.rule import Rule, option
from tracelint.timeline import classify, host_scope
from tracelint.whatif.edits import Ops, Scale

SHAPES_HINT = ("torch.profiler.profile(record_shapes=True) (tracelint capture sets it), or "
               "nsys with torch.autograd.profiler.emit_nvtx(record_shapes=True)")
#: Ops after the convolution that only touch 0-d tensors (BatchNorm's
#: `num_batches_tracked.add_(1)` in training) are skipped on the way to the consumer.
LOOKAHEAD = 3
NO_SAVING = ("the bias add has no kernel of its own in this trace (fused into the convolution, "
             "or no GPU activity): its cost cannot be separated, so no saving can be established")


@dataclass(frozen=True)
class Options:
    min_pairs: int = option(1, "Report when at least this many convolution calls with a bias feed a batch norm.")


class ConvBiasBeforeBatchNorm(Rule):
    """A convolution with a bias feeds BatchNorm, which cancels the bias.

    What it detects: a convolution op (`aten::conv2d`, `conv1d`, `conv3d`, `convolution`,
    `conv_transpose*`) whose recorded inputs include a bias (the third entry of Input Dims is a
    [C_out] tensor), and whose next op on the same thread and nesting level is a batch norm
    (`aten::batch_norm`, `native_batch_norm`, `cudnn_batch_norm`, ...) on a tensor with the
    convolution's batch size and as many channels as the bias. Ops that only touch 0-d tensors
    in between (BatchNorm's `num_batches_tracked.add_(1)` in training) are skipped. Neither trace
    format records tensor identities, so "on its output" is inferred from order and shape.
    Input shapes are needed: torch.profiler with record_shapes=True, or nsys with
    emit_nvtx(record_shapes=True) ("sizes = [...]" in the op's NVTX text). Without them the rule
    does not guess: it is listed as skipped with the number of conv -> batch norm pairs it saw.
    Why it hurts: BatchNorm subtracts the per-channel mean over the batch, so the per-channel
    constant the bias adds is removed again (in eval mode BatchNorm's own shift absorbs it). The
    bias still costs: on CUDA PyTorch adds it with a separate elementwise kernel after the cuDNN
    convolution (a full read and write of the output), backward reduces the output gradient to
    a bias gradient that is always ~0, the optimizer updates it every step, and the parameter,
    its gradient and optimizer state take memory.
    Evidence: system: convolution calls with a bias that feed a batch norm, per iteration, and
    the Python line; kernel: the GPU time of the bias-add kernels launched inside those
    convolutions (measured), or the bytes the bias add moves, from the recorded output shape
    (estimated: 2 x elements x element size) when the trace has no separate kernel for it;
    microarch: not applicable.
    Fix: `nn.Conv2d(..., bias=False)` for every convolution followed by BatchNorm (torchvision's
    ResNets do this); when loading old checkpoints, fold the bias into BatchNorm's running mean
    (running_mean -= bias) before dropping it.
    Counter-example (when it does not apply): a convolution with a bias followed by an
    activation or anything but a batch norm; a batch norm that does not normalise over the
    bias's axis (a custom layout); GroupNorm / LayerNorm, which do not remove a per-channel
    constant; a bias that is intentionally kept for checkpoint compatibility (cost is small).
    """

    id = "TL034"
    slug = "conv-bias-before-batchnorm"
    title = "Convolution bias cancelled by the BatchNorm after it"
    severity = Severity.INFO
    groups = frozenset({"framework", "model"})
    layers = frozenset({Layer.SYSTEM, Layer.KERNEL})
    needs = frozenset({"ranges"})
    frameworks = frozenset({"pytorch"})     # reads aten:: op names and their recorded shapes
    Options = Options

    def _analysis(self, ctx) -> dict | None:
        """The conv -> batch norm pairs, once per context (applicable, check and fix_edits)."""
        return self.once_per_context(ctx, _analyse)

    def applicable(self, ctx):
        a = self._analysis(ctx)
        if a is not None and a["undecided"] and not a["decided"]:
            return (f"{a['undecided']} convolution -> batch norm pair(s) seen, but op input shapes "
                    f"were not recorded, so whether the convolutions have a bias cannot be told "
                    f"(capture with {SHAPES_HINT})")
        return None

    def fix_edits(self, finding, ctx):
        a = self._analysis(ctx)
        rows = tuple(a["bias_kernels"].tolist()) if a is not None else ()
        if not rows:
            return None, NO_SAVING
        return [Scale(None, 0.0, ops=Ops(kernel_rows=rows), with_launch=True)], ""

    def check(self, ctx):
        a = self._analysis(ctx)
        if a is None or len(a["pairs"]) < self.options.min_pairs:
            return
        r = ctx.tl.ranges
        pairs = a["pairs"]
        convs = np.array([p[0] for p in pairs], dtype=np.int64)
        steps = r[classify.in_labels(r["kind"], ("step",))]
        n_steps = max(len(steps), 1)
        per_step = len(pairs) / n_steps
        layers = sorted({(layer, bias_len) for _, _, _, layer, bias_len in pairs})
        first = int(convs[0])
        row = r.iloc[first]
        where = ctx.where_for_host(int(row["pid"]), int(row["tid"]), int(row["start"]),
                                   start_ns=int(row["start"]), end_ns=int(row["end"]))
        out_elems = int(sum(int(np.prod(p[2])) for p in pairs))
        itemsize = a["itemsize"]
        system = Evidence.measured(
            f"{len(pairs)} convolution call(s) with a bias feed a batch norm "
            f"({per_step:g} per iteration over {n_steps} iteration(s), {len(layers)} distinct "
            f"layer shape(s)); {a['without_bias']} convolution -> batch norm pair(s) without a "
            f"bias in the same trace.",
            pairs=Measure(len(pairs), "count"), per_iteration=Measure(round(per_step, 3), "count"),
            layers=Measure(len(layers), "count"), pairs_without_bias=Measure(a["without_bias"], "count"))
        kernel, impact = self._kernel_evidence(ctx, a, out_elems, itemsize)
        bias_params = int(sum(n for _, n in layers))
        msg = (f"{len(pairs)} convolution call(s) with a bias feed a BatchNorm that cancels it "
               f"({per_step:g} per iteration): use bias=False")
        yield self.finding(
            ctx, message=msg, impact_ns=impact, where=where, occurrences=len(pairs),
            windows=[(int(r["start"].iat[c]), int(r["end"].iat[c])) for c in convs[:5]],
            evidence={Layer.SYSTEM: system, Layer.KERNEL: kernel,
                      Layer.MICROARCH: Evidence.not_applicable("a wasted op, not an inefficient kernel")},
            metrics={"pairs": Measure(len(pairs), "count"), "per_iteration": Measure(round(per_step, 3), "count"),
                     "bias_elements": Measure(bias_params, "count"),
                     "bias_add_elements": Measure(out_elems, "count")},
            key="conv_bias_bn", saving_note="" if len(a["bias_kernels"]) else NO_SAVING)

    def _kernel_evidence(self, ctx, a, out_elems, itemsize):
        rows = a["bias_kernels"]
        if len(rows):
            k = ctx.tl.kernels.iloc[rows]
            gpu_ns = int((k["end"] - k["start"]).sum())
            return Evidence.measured(
                f"{len(rows)} bias-add kernel(s) launched inside these convolutions take "
                f"{gpu_ns / 1e3:.1f} µs of GPU time; the backward bias-gradient reduction and the "
                f"optimizer update of the bias are not counted.",
                kernels=Measure(len(rows), "count"), gpu_time_ns=Measure(gpu_ns, "ns")), gpu_ns
        if itemsize:
            nbytes = 2 * out_elems * itemsize
            return Evidence.estimated(
                f"The bias adds to {out_elems:,} output elements: about {nbytes / 1e6:.2f} MB read "
                f"and written when it runs as its own kernel (on CUDA it does); this trace has no "
                f"separate kernel for it, so no time is measured.",
                "bytes = 2 x output elements x element size", {"elements": out_elems, "itemsize": itemsize},
                bias_add_bytes=Measure(nbytes, "bytes")), 0
        return Evidence.not_captured(
            "No kernel for the bias add and no element type recorded: its cost is not measured.",
            "torch.profiler with ProfilerActivity.CUDA and record_shapes=True on the GPU run"), 0


def _analyse(ctx) -> dict | None:
    tl = ctx.tl
    r = tl.ranges
    if len(r) == 0:
        return None
    is_op = classify.in_labels(r["kind"], ("op", "nvtx"))
    label = np.asarray(classify.classify_categorical(r["name"], lambda n: classify.model_op(n) or ""),
                       dtype=object)
    parent = r["parent"].to_numpy()
    conv = is_op & (label == "conv")
    if not conv.any():
        return None
    outer = conv & ~((parent >= 0) & (label[np.clip(parent, 0, None)] == "conv"))
    shapes = _Shapes(tl)
    pid, tid, start = r["pid"].to_numpy(), r["tid"].to_numpy(), r["start"].to_numpy()
    ops = np.flatnonzero(is_op)
    order = ops[np.lexsort((start[ops], parent[ops], tid[ops], pid[ops]))]
    pos = {int(row): i for i, row in enumerate(order)}
    pairs, without, undecided, dtypes = [], 0, 0, []
    for c in np.flatnonzero(outer):
        key = (pid[c], tid[c], parent[c])
        nxt = [int(x) for x in order[pos[int(c)] + 1: pos[int(c)] + 1 + LOOKAHEAD]]
        nxt = [x for x in nxt if (pid[x], tid[x], parent[x]) == key]
        d = shapes.dims(int(c))
        if d is None:
            undecided += _bn_next_unshaped(nxt, label)
            continue
        bn = _consumer_bn(d, nxt, label, shapes)
        if bn is None:
            continue
        bias = d[2] if len(d) > 2 and isinstance(d[2], list) else []
        if bias:
            layer = (str(tuple(d[0])), str(tuple(d[1])) if isinstance(d[1], list) else "")
            pairs.append((int(c), int(bn), tuple(shapes.dims(bn)[0]), layer, int(bias[0])))
            dtypes.append(shapes.dtype(int(c)))
        else:
            without += 1
    itemsize = {"float": 4, "c10::Half": 2, "c10::BFloat16": 2, "double": 8}.get(
        next((t for t in dtypes if t), ""), 0)
    return {"pairs": pairs, "without_bias": without, "undecided": undecided,
            "decided": len(pairs) + without, "itemsize": itemsize,
            "bias_kernels": _bias_kernels(ctx, [p[0] for p in pairs], label, is_op)}


def _bn_next_unshaped(nxt, label) -> int:
    """1 when a batch norm follows (past at most one add, BatchNorm's counter) without shapes."""
    for x in nxt[:2]:
        if label[x] == "batch_norm":
            return 1
        if label[x] != "add":
            return 0
    return 0


def _consumer_bn(d, nxt, label, shapes) -> int | None:
    """The batch norm row that consumes the conv's output, or None (another op consumes it)."""
    x_in = d[0] if d and isinstance(d[0], list) else []
    if len(x_in) < 3:
        return None
    for x in nxt:
        dx = shapes.dims(x)
        if label[x] == "batch_norm":
            if dx and isinstance(dx[0], list) and len(dx[0]) == len(x_in) and dx[0][0] == x_in[0]:
                bias = d[2] if len(d) > 2 and isinstance(d[2], list) else []
                if not bias or dx[0][1] == bias[0]:
                    return x
            return None
        if dx is None or any(isinstance(t, list) and len(t) > 0 for t in dx):
            return None        # an op on real tensors came first: it is the consumer
    return None


def _bias_kernels(ctx, convs, label, is_op) -> np.ndarray:
    """Kernels launched from `aten::add(_)` ops nested inside the flagged convolutions."""
    tl = ctx.tl
    api = tl.api_calls
    if not convs or len(api) == 0 or len(tl.kernels) == 0:
        return np.zeros(0, dtype=np.int64)
    r = tl.ranges
    pid, tid = r["pid"].to_numpy(), r["tid"].to_numpy()
    s, e = r["start"].to_numpy(), r["end"].to_numpy()
    adds = np.flatnonzero(is_op & (label == "add"))
    held = [adds[(pid[adds] == pid[c]) & (tid[adds] == tid[c]) & (s[adds] >= s[c]) & (e[adds] <= e[c])]
            for c in convs]                     # the adds inside each flagged convolution
    x = np.concatenate(held) if held else np.zeros(0, np.int64)
    inside = host_scope.calls_inside(api, pid[x], tid[x], s[x], e[x])
    launch = ctx.launch_index("kernels")
    return np.flatnonzero((launch >= 0) & inside[np.clip(launch, 0, None)])


class _Shapes:
    """Recorded input dims of an op row: Kineto's Input Dims (by External id) or emit_nvtx sizes."""

    def __init__(self, tl):
        self.inputs = tl.meta.extra.get("op_inputs") or {}
        r = tl.ranges
        self.names = r["name"]
        self.ext = r["external_id"].to_numpy()
        self._nvtx: dict[str, list | None] = {}
        self._memo: dict[int, tuple] = {}

    def _rec(self, row: int):
        rec = self.inputs.get(int(self.ext[row])) if self.ext[row] >= 0 else None
        return rec if rec is not None and rec[0] == str(self.names.iat[row]) else None

    def dims(self, row: int) -> list | None:
        if row in self._memo:
            return self._memo[row][0]
        rec = self._rec(row)
        dims = _json(rec[1]) if rec is not None else None
        if dims is None:
            name = str(self.names.iat[row])
            if name not in self._nvtx:
                self._nvtx[name] = classify.nvtx_op_sizes(name)
            dims = self._nvtx[name]
        self._memo[row] = (dims if isinstance(dims, list) else None,)
        return self._memo[row][0]

    def dtype(self, row: int) -> str:
        rec = self._rec(row)
        types = _json(rec[2]) if rec is not None else None
        return str(types[0]) if isinstance(types, list) and types else ""


def _json(value):
    if isinstance(value, (bytes, bytearray, str)):
        if not value:
            return None
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value
