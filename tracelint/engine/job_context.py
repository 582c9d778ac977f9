"""The job context that job-scope rules (TL201-TL205) read, built from rank summaries.

The JobContext is the reduce step's product. It is built from RankSummary objects only (never
from a Timeline), so the coordinating process holds summaries, not traces:

- iterations: one row per (rank, iteration); iterations are matched across ranks by their step
  number (ProfilerStep#N) when every rank has step numbers in common, else by position;
- collectives: one row per collective kernel per rank, with a match key. The k-th call of a
  collective (per process group and, when iterations are matched, per iteration) on one rank is
  the same call as the k-th on every other rank. Point-to-point operations (Send, Recv,
  SendRecv) pair two ranks only and are left out of arrival-skew analysis;
- clock offsets: ranks on different hosts have different clocks. A collective ends at (nearly)
  the same instant on every rank that takes part (it cannot finish before the last rank has
  contributed), so each rank's clock offset is estimated as the robust (median) difference
  between its collective end times and the job's, by alternating medians over all matched
  collectives. Arrival skew is then measured on aligned start times;
- per collective and rank: wait (from this rank's start to the last rank's arrival) and
  transfer (from the last arrival to the end), and how much of each compute overlapped.
"""
from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .finding import Severity

if TYPE_CHECKING:   # a RankSummary (tracelint.ranks.summary) is read through its attributes
    from .config import Config

#: Bus-bandwidth factor per collective (NCCL's convention, nccl-tests doc/PERFORMANCE.md):
#: busbw = algbw * factor(n), algbw = S / t, with S the larger of the input and output buffer
#: (AllReduce and Broadcast: the buffer; AllGather: the gathered output; ReduceScatter: the
#: input; AllToAll: the send buffer) and t the time from the last rank's arrival to the end.
BUSBW_FACTOR = {
    "AllReduce": lambda n: 2 * (n - 1) / n,
    "ReduceScatter": lambda n: (n - 1) / n,
    "AllGather": lambda n: (n - 1) / n,
    "AllToAll": lambda n: (n - 1) / n,
    "Broadcast": lambda n: 1.0,
    "Reduce": lambda n: 1.0,
    "SendRecv": lambda n: 1.0,
    "Send": lambda n: 1.0,
    "Recv": lambda n: 1.0,
    "Gather": lambda n: (n - 1) / n,
    "Scatter": lambda n: (n - 1) / n,
}

#: Per-direction NVLink / Infinity Fabric peak of one GPU, GB/s, by GPU name: what an
#: intra-node collective can reach at best. Inter-node traffic is bounded by the NICs instead
#: (e.g. 8 x 200 Gb/s InfiniBand per 8-GPU node = 25 GB/s per GPU), which no trace records:
#: TL205 uses these only when told the collectives stay inside one node.
LINK_PEAK_GBPS = (
    ("B200", 900.0), ("B100", 900.0), ("GB200", 900.0), ("H200", 450.0), ("H100", 450.0),
    ("H800", 200.0), ("A800", 200.0), ("A100", 300.0), ("V100", 150.0),
    ("MI300", 448.0), ("MI250", 400.0),
)


#: Arrival differences up to this (ns) are ties: clock alignment is not more precise.
TIE_NS = 1_000
#: Collective ends of one call agree across ranks to within this (or a quarter of the call's
#: duration) after clock alignment; worse means the matching is wrong.
ALIGN_FLOOR_NS = 20_000


def link_peak_for(gpu_name: str | None) -> float | None:
    n = (gpu_name or "").upper()
    if "PCIE" in n:
        return 32.0   # PCIe 4.0 x16, per direction
    for key, peak in LINK_PEAK_GBPS:
        if key in n:
            return peak
    return None


class JobContext:
    """What a cross-rank rule sees: summaries of the ranks and the aligned, matched tables."""

    def __init__(self, ranks: list, config: "Config | None" = None,
                 include_unknown: bool = False):
        self.ranks = sorted(ranks, key=lambda s: s.rank)
        self.by_rank = {s.rank: s for s in self.ranks}
        self.rank_ids = [s.rank for s in self.ranks]
        self.config = config
        self.include_unknown = include_unknown
        self.notes: list[str] = []
        self.iterations, self.matched_by = self._iterations()
        self.collectives, self.coll_matched_by = self._collectives()
        self.alignment_ok = True
        self.alignment_residual_ns = 0.0
        self.offsets = self._offsets()
        self._align()
        self.matched = self._matched()
        self._wait_transfer()

    # ----- configuration ---------------------------------------------------------------------
    def severity_for(self, rule) -> Severity:
        return self.config.severity_for(rule) if self.config is not None else rule.severity

    @property
    def n(self) -> int:
        return len(self.ranks)

    @property
    def span_ns(self) -> int:
        """The denominator of a job finding's share: the job's analysed window."""
        return self.window_ns

    @cached_property
    def window_ns(self) -> int:
        """The denominator of impact shares: the median rank's iteration (or trace) time."""
        vals = [s.totals.get("iterations_ns", 0) or s.totals.get("span_ns", 0) for s in self.ranks]
        return int(np.median(vals)) if vals else 0

    def iteration_ns(self, rank: int) -> int:
        s = self.by_rank[rank]
        it = self.iterations[self.iterations["rank"] == rank]
        return int(it["dur_ns"].sum()) if len(it) else int(s.totals.get("span_ns", 0))

    def device_of(self, rank: int) -> int | None:
        c = self.collectives
        on = c[c["rank"] == rank] if len(c) else c
        if len(on):
            return int(on["device"].iat[0])
        devs = self.by_rank[rank].devices
        return int(devs[0]["id"]) if devs else None

    def gpu_name(self) -> str | None:
        for s in self.ranks:
            for d in s.devices:
                if d.get("name"):
                    return str(d["name"])
        return None

    # ----- iterations ------------------------------------------------------------------------
    def _iterations(self) -> tuple[pd.DataFrame, str]:
        frames = []
        for s in self.ranks:
            it = s.iterations
            if not len(it):
                continue
            f = it.copy()
            f["rank"] = s.rank
            f["pseudo"] = bool(s.pseudo_iterations)
            f["pos"] = np.arange(len(f))
            frames.append(f)
        cols = ["rank", "it", "step", "pos", "start", "end", "dur_ns", "compute_ns", "comm_ns",
                "exposed_comm_ns", "busy_ns", "kernels"]
        if not frames:
            return pd.DataFrame(columns=cols), "none"
        df = pd.concat(frames, ignore_index=True)
        by_step = not df["pseudo"].any()
        if by_step:
            common = set.intersection(*(set(f["step"]) for f in frames))
            if len(common) == 0:
                by_step = False
            else:
                dropped = int((~df["step"].isin(common)).sum())
                if dropped:
                    self.notes.append(f"{dropped} iteration(s) not recorded on every rank were left "
                                      "out of the cross-rank iteration comparison")
                df = df[df["step"].isin(common)].copy()
                df["it"] = df["step"]
        if not by_step:
            m = min(len(f) for f in frames)
            if len(frames) > 1 and not df["pseudo"].all():
                self.notes.append("iterations matched across ranks by position (step numbers "
                                  "differ or are missing)")
            df = df[df["pos"] < m].copy()
            df["it"] = df["pos"]
        return df[cols].reset_index(drop=True), ("step number" if by_step else "position")

    @cached_property
    def iteration_matrix(self) -> dict[str, pd.DataFrame]:
        """rank x iteration tables of dur_ns and compute_ns (what the job view plots)."""
        it = self.iterations
        if not len(it):
            return {"dur_ns": pd.DataFrame(), "compute_ns": pd.DataFrame()}
        return {c: it.pivot_table(index="rank", columns="it", values=c, aggfunc="sum")
                for c in ("dur_ns", "compute_ns", "exposed_comm_ns")}

    # ----- collectives -----------------------------------------------------------------------
    def _collectives(self) -> tuple[pd.DataFrame, str]:
        frames = []
        for s in self.ranks:
            c = s.collectives
            if isinstance(c, pd.DataFrame) and len(c):
                f = c.copy()
                f["rank"] = s.rank
                frames.append(f)
        if not frames:
            return pd.DataFrame(columns=["rank", "coll", "kind", "key", "start", "end", "dur_ns",
                                         "device", "cid"]), "none"
        df = pd.concat(frames, ignore_index=True)
        for col in ("kernel", "coll", "kind", "pg", "dtype", "size_source"):
            df[col] = df[col].astype(str)
        kinds = {"collective", "unknown"} if self.include_unknown else {"collective"}
        df["matchable"] = df["kind"].isin(kinds)
        # Per-iteration keys when iterations are matched by step number and every matchable
        # collective was launched inside a recorded iteration; else the k-th call overall.
        m = df[df["matchable"]]
        by_step = self.matched_by == "step number" and len(m) and (m["step"] >= 0).all()
        if by_step:
            df["key"] = (df["pg"] + "|" + df["coll"] + "|it" + df["step"].astype(str) + "#" +
                         df["k_in_step"].astype(str))
        else:
            df["key"] = df["pg"] + "|" + df["coll"] + "|#" + df["occurrence"].astype(str)
        df.loc[~df["matchable"], "key"] = ""
        n_p2p = int((df["kind"] == "p2p").sum())
        if n_p2p:
            self.notes.append(f"{n_p2p} point-to-point kernel(s) (Send/Recv/SendRecv) pair two ranks "
                              "only: left out of arrival-skew matching")
        n_unk = int((df["kind"] == "unknown").sum())
        if n_unk and not self.include_unknown:
            self.notes.append(f"{n_unk} communication kernel(s) whose collective is unknown "
                              "(e.g. ncclDevKernel_Generic without record_param_comms) were left "
                              "out of matching")
        return df, ("iteration and call index" if by_step else "call index")

    def _offsets(self) -> dict[int, int]:
        """Per-rank clock offset (ns) from collective end times, by alternating medians."""
        zero = {r: 0 for r in self.rank_ids}
        c = self.collectives
        if not len(c) or self.n < 2:
            return zero
        m = c[c["key"] != ""]
        counts = m.groupby("key")["rank"].nunique()
        keys = counts[counts >= 2].index
        if len(keys) < 3:
            if len(keys):
                self.notes.append("fewer than 3 collectives matched across ranks: clocks assumed "
                                  "synchronised (no offset estimated)")
            return zero
        m = m[m["key"].isin(keys)]
        base = int(np.median(m["end"].to_numpy()))
        e = m.pivot_table(index="key", columns="rank", values="end", aggfunc="first")
        ranks = [int(r) for r in e.columns]
        E = e.to_numpy(dtype=np.float64) - base
        o = np.zeros(E.shape[1])
        for _ in range(30):
            mk = np.nanmedian(E - o[None, :], axis=1)
            o_new = np.nanmedian(E - mk[:, None], axis=0)
            o_new = np.where(np.isnan(o_new), 0.0, o_new)
            o_new -= np.median(o_new)
            if np.allclose(o_new, o, atol=1.0):
                o = o_new
                break
            o = o_new
        resid = np.abs(E - o[None, :] - np.nanmedian(E - o[None, :], axis=1)[:, None])
        dur = m.pivot_table(index="key", columns="rank", values="dur_ns", aggfunc="first").to_numpy()
        per_rank = np.nanmedian(resid, axis=0)          # each rank's typical misfit
        self.alignment_residual_ns = float(np.nanmax(per_rank))
        limit = max(0.25 * np.nanmedian(dur), ALIGN_FLOOR_NS)
        bad = [r for r, v in zip(ranks, per_rank) if v > limit]
        if bad:
            self.alignment_ok = False
            self.notes.append("collective end times do not line up across ranks even after clock "
                              f"alignment (rank(s) {rank_list(bad)}: median residual up to "
                              f"{self.alignment_residual_ns / 1e3:.0f} µs): "
                              "the calls matched are probably not the same calls (ranks recorded "
                              "different windows, or are not synchronised by these collectives); "
                              "arrival skew and wait / transfer splits are not reported")
            return zero
        out = dict(zero)
        out.update({r: int(round(v)) for r, v in zip(ranks, o)})
        if max(abs(v) for v in out.values()) >= 1000:
            self.notes.append("clock offsets between ranks estimated from collective end times "
                              "(largest " + f"{max(abs(v) for v in out.values()) / 1e6:.3f} ms)")
        return out

    def _align(self) -> None:
        c = self.collectives
        if len(c):
            off = c["rank"].map(self.offsets).fillna(0).astype(np.int64)
            c["a_start"] = c["start"] - off
            c["a_end"] = c["end"] - off

    def _matched(self) -> pd.DataFrame:
        """One row per collective call matched on at least two ranks."""
        cols = ["key", "coll", "pg", "step", "k", "n_ranks", "first_rank", "last_rank",
                "skew_ns", "last_gap_ns", "last_start", "end", "transfer_ns", "bytes", "group_size",
                "max_dur_ns", "kernel"]
        c = self.collectives
        if not len(c) or not self.alignment_ok:
            return pd.DataFrame(columns=cols)
        m = c[c["key"] != ""]
        if not len(m):
            return pd.DataFrame(columns=cols)
        g = m.groupby("key", sort=False)
        n = g["rank"].nunique()
        keys = n[n >= 2].index
        m = m[m["key"].isin(keys)].sort_values(["key", "a_start", "rank"], kind="stable")
        g = m.groupby("key", sort=False)
        first = g.head(1).set_index("key")
        last = g.tail(1).set_index("key")
        second = g["a_start"].apply(lambda s: s.iloc[-2] if len(s) > 1 else s.iloc[-1])
        end_med = g["a_end"].median()
        out = pd.DataFrame({
            "coll": last["coll"], "pg": last["pg"], "step": last["step"],
            "k": last["k_in_step"], "n_ranks": g["rank"].nunique(),
            "first_rank": first["rank"], "last_rank": last["rank"],
            "skew_ns": last["a_start"] - first["a_start"],
            "last_gap_ns": last["a_start"] - second,
            "last_start": last["a_start"], "end": end_med.astype(np.int64),
            "bytes": g["bytes"].max(), "group_size": g["group_size"].max(),
            "max_dur_ns": g["dur_ns"].max(), "kernel": last["kernel"],
        })
        out["transfer_ns"] = (out["end"] - out["last_start"]).clip(lower=0)
        # a tie is no late arrival: no rank is last when the skew is within TIE_NS
        tie = out["skew_ns"] <= TIE_NS
        out.loc[tie, ["first_rank", "last_rank"]] = -1
        out["order"] = g["a_start"].min()
        out = out.sort_values("order").drop(columns="order")
        out.index.name = "key"
        return out.reset_index()[cols]

    def _wait_transfer(self) -> None:
        """Per collective row: wait (before the last rank arrived) and transfer time, and the
        compute-free (exposed) part of each."""
        c = self.collectives
        if not len(c):
            return
        c["wait_ns"] = 0
        c["exposed_wait_ns"] = 0
        c["exposed_transfer_ns"] = c["exposed_ns"]
        c["late_ns"] = 0
        mt = self.matched.set_index("key") if len(self.matched) else None
        if mt is None:
            return
        on = c["key"].isin(mt.index)
        last_start = c.loc[on, "key"].map(mt["last_start"])
        wait = (last_start - c.loc[on, "a_start"]).clip(lower=0)
        wait = np.minimum(wait.to_numpy(), c.loc[on, "dur_ns"].to_numpy())
        c.loc[on, "wait_ns"] = wait
        # compute overlapping the wait window [start, start + wait)
        pieces = []
        for s in self.ranks:
            if isinstance(s.overlap, pd.DataFrame) and len(s.overlap):
                p = s.overlap.copy()
                p["rank"] = s.rank
                pieces.append(p)
        ov_wait = np.zeros(int(on.sum()), dtype=np.int64)
        if pieces:
            p = pd.concat(pieces, ignore_index=True)
            sub = c.loc[on, ["rank", "cid", "start"]].copy()
            sub["wend"] = sub["start"] + wait
            sub["row"] = np.arange(len(sub))
            j = p.merge(sub, on=["rank", "cid"], how="inner", suffixes=("_p", ""))
            if len(j):
                clip = (np.minimum(j["end"], j["wend"]) - j["start_p"]).clip(lower=0)
                ov_wait = np.bincount(j["row"].to_numpy(), weights=clip.to_numpy(),
                                      minlength=len(sub)).astype(np.int64)
        ov_total = c.loc[on, "overlap_ns"].to_numpy()
        dur = c.loc[on, "dur_ns"].to_numpy()
        c.loc[on, "exposed_wait_ns"] = wait - ov_wait
        c.loc[on, "exposed_transfer_ns"] = (dur - wait) - (ov_total - ov_wait)
        # lateness: aligned start minus the median of the other ranks' aligned starts
        m = c[on]
        grp = m.groupby("key")["a_start"]
        tot, cnt = grp.transform("sum"), grp.transform("count")
        med = grp.transform("median")
        others_mean = (tot - m["a_start"]) / (cnt - 1).clip(lower=1)
        # with 2 ranks the "others' median" is the other rank; otherwise use the job median
        late = np.where(cnt > 2, m["a_start"] - med, m["a_start"] - others_mean)
        c.loc[on, "late_ns"] = np.asarray(late, dtype=np.int64)

    # ----- per-rank table --------------------------------------------------------------------
    @cached_property
    def rank_table(self) -> pd.DataFrame:
        rows = []
        c = self.collectives
        mt = self.matched
        it = self.iterations
        for s in self.ranks:
            r = s.rank
            mine = c[c["rank"] == r] if len(c) else c
            matched = mine[mine["key"].isin(mt["key"])] if len(mt) and len(mine) else mine.iloc[0:0]
            its = it[it["rank"] == r] if len(it) else it
            rows.append({
                "rank": r, "label": s.label, "iterations": int(len(s.iterations)),
                "iteration_ns": self.iteration_ns(r),
                "step_median_ns": float(np.median(its["dur_ns"])) if len(its) else float("nan"),
                "compute_median_ns": float(np.median(its["compute_ns"])) if len(its) else float("nan"),
                "compute_ns": int(s.totals.get("compute_ns", 0)),
                "comm_ns": int(s.totals.get("comm_ns", 0)),
                "exposed_comm_ns": int(s.totals.get("exposed_comm_ns", 0)),
                "exposed_wait_ns": int(matched["exposed_wait_ns"].sum()) if len(matched) else 0,
                "exposed_transfer_ns": int(matched["exposed_transfer_ns"].sum()) if len(matched) else 0,
                "wait_ns": int(matched["wait_ns"].sum()) if len(matched) else 0,
                "matched": int(len(matched)),
                "last_arrivals": int((mt["last_rank"] == r).sum()) if len(mt) else 0,
                "median_late_ns": float(np.median(matched["late_ns"])) if len(matched) else 0.0,
                "clock_offset_ns": int(self.offsets.get(r, 0)),
                "findings": len(s.findings),
            })
        return pd.DataFrame(rows).set_index("rank") if rows else pd.DataFrame()

    @cached_property
    def skew_by_collective(self) -> pd.DataFrame:
        """Per collective name: calls matched, median / p90 / max arrival skew, who is last."""
        mt = self.matched
        if not len(mt):
            return pd.DataFrame(columns=["coll", "calls", "median_skew_ns", "p90_skew_ns",
                                         "max_skew_ns", "last_rank", "last_share"])
        rows = []
        for coll, g in mt.groupby("coll", sort=False):
            lr = g.loc[g["last_rank"] >= 0, "last_rank"].value_counts()
            rows.append({"coll": coll, "calls": int(len(g)),
                         "median_skew_ns": float(np.median(g["skew_ns"])),
                         "p90_skew_ns": float(np.percentile(g["skew_ns"], 90)),
                         "max_skew_ns": float(g["skew_ns"].max()),
                         "last_rank": int(lr.index[0]) if len(lr) else -1,
                         "last_share": float(lr.iloc[0] / len(g)) if len(lr) else 0.0})
        return pd.DataFrame(rows)

    @cached_property
    def bandwidth(self) -> pd.DataFrame:
        """Per call with a known size: algorithm and bus bandwidth (GB/s), NCCL's convention.

        Matched calls are timed from the last rank's arrival to the end (the transfer alone);
        a call seen on one rank only is timed by its kernel (waiting included: a lower bound)."""
        rows = []
        mt = self.matched
        if len(mt):
            k = mt[mt["bytes"] > 0]
            for r in k.itertuples(index=False):
                rows.append((r.coll, int(r.bytes), int(r.group_size), int(r.transfer_ns), "transfer",
                             r.key))
        c = self.collectives
        if len(c):
            un = c[(c["bytes"] > 0) & ~c["key"].isin(mt["key"] if len(mt) else [])]
            for r in un.itertuples(index=False):
                rows.append((r.coll, int(r.bytes), int(r.group_size), int(r.dur_ns), "kernel", ""))
        df = pd.DataFrame(rows, columns=["coll", "bytes", "group_size", "time_ns", "timed_by", "key"])
        if not len(df):
            return df.assign(algbw_gbps=[], busbw_gbps=[])
        world = max([s.world_size or 0 for s in self.ranks] + [self.n])
        n = np.where(df["group_size"] > 0, df["group_size"], world).astype(float)
        df["n"] = n.astype(int)
        t = df["time_ns"].clip(lower=1).astype(float)
        df["algbw_gbps"] = df["bytes"] / t          # bytes/ns == GB/s
        fac = [BUSBW_FACTOR.get(c, lambda n: 1.0)(max(nn, 1)) if nn > 1 else 1.0
               for c, nn in zip(df["coll"], df["n"])]
        df["busbw_gbps"] = df["algbw_gbps"] * np.asarray(fac)
        return df

    @cached_property
    def bandwidth_by_collective(self) -> pd.DataFrame:
        bw = self.bandwidth
        if not len(bw):
            return pd.DataFrame(columns=["coll", "calls", "median_bytes", "median_time_ns",
                                         "median_algbw_gbps", "median_busbw_gbps",
                                         "max_busbw_gbps", "timed_by", "n"])
        rows = []
        for coll, g in bw.groupby("coll", sort=False):
            rows.append({"coll": coll, "calls": int(len(g)),
                         "median_bytes": float(np.median(g["bytes"])),
                         "median_time_ns": float(np.median(g["time_ns"])),
                         "median_algbw_gbps": float(np.median(g["algbw_gbps"])),
                         "median_busbw_gbps": float(np.median(g["busbw_gbps"])),
                         "max_busbw_gbps": float(g["busbw_gbps"].max()),
                         "timed_by": ",".join(sorted(set(g["timed_by"]))),
                         "n": int(np.median(g["n"]))})
        return pd.DataFrame(rows)


def rank_list(ranks) -> str:
    ranks = [int(r) for r in ranks]
    if len(ranks) <= 8:
        return ", ".join(str(r) for r in ranks)
    return ", ".join(str(r) for r in ranks[:8]) + f", … ({len(ranks)} ranks)"


__all__ = ["JobContext", "BUSBW_FACTOR", "LINK_PEAK_GBPS", "link_peak_for", "rank_list"]
