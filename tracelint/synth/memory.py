"""Memory events for synthetic traces: a caching-allocator model on top of a TraceBuilder.

    mem = memory(b)                      # one model per builder (b.memory_model)
    a = mem.alloc(64 << 20, op="aten::empty")   # allocator event; grows reserved (cudaMalloc)
    mem.free(a)                          # allocator event
    mem.empty_cache()                    # cudaFree of the unused reserved memory

Kineto: each allocator event is a `[memory]` instant event (cat cpu_instant_event) with Bytes,
Total Allocated, Total Reserved, Device Type, Device Id and Addr, as torch.profiler writes them
with profile_memory=True. nsys: each segment obtained or returned (the cudaMalloc / cudaFree
the model issues) is a CUDA_GPU_MEMORY_USAGE_EVENTS row, with the DDL of a real export; nsys
does not see the allocator's own blocks. `device_type="cpu"` models the CPU allocator (no
cache: reserved stays 0, no driver events), which nsys cannot show at all.
"""
from __future__ import annotations

from dataclasses import dataclass

from .vocab import _T

#: Verbatim from the Nsight Systems 2022.2 export in shared/traces/nsys (the only shared export
#: with the table; the 2024.5 schema file beside this module has none).
NSYS_DDL = """CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    globalPid                   INTEGER   NOT NULL,                    -- Serialized GlobalId.
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    address                     INTEGER   NOT NULL,                    -- Virtual address of the allocation/deallocation.
    pc                          INTEGER   NOT NULL,                    -- Program counter of the allocation/deallocation.
    bytes                       INTEGER   NOT NULL,                    -- Number of bytes allocated/deallocated (B).
    memKind                     INTEGER   NOT NULL,                    -- Type of memory being allocated/deallocated. See enum CUDA_MEMOPR_MEMORY_KIND.
    memoryOperationType         INTEGER   NOT NULL,                    -- 0 if memory was allocated and 1 if memory was deallocated.
    name                        TEXT,                                  -- Variable name, if available.
    correlationId               INTEGER                                -- ID used to identify the API call that launched the event.
)"""
EVENT_NS = 1_000             # host time each allocator event takes (keeps timestamps distinct)
MALLOC_NS, FREE_NS = 60_000, 200_000
_DEVICE_TYPE = {"cpu": 0, "cuda": 1}


@dataclass
class _Event:
    ts: int
    nbytes: int
    allocated: int
    reserved: int
    addr: int


@dataclass
class _Segment:
    ts: int
    nbytes: int               # signed: obtained (+) or returned (-)
    addr: int
    correlation: int


class MemoryModel:
    def __init__(self, b, device_type: str = "cuda", block: int = 2 << 20):
        self.b, self.device_type, self.block = b, device_type, block
        self.allocated = self.reserved = 0
        self.events: list[_Event] = []
        self.segments: list[_Segment] = []
        self._live: dict[int, int] = {}
        self._next = 0x7F0000000000

    @property
    def caching(self) -> bool:
        return self.device_type != "cpu"

    def alloc(self, nbytes: int, op: str | None = None) -> int:
        """Allocate at the host cursor (inside a CPU op `op` when given); returns the address."""
        if op is not None:
            with self.b.op(op):
                return self.alloc(nbytes)
        need = self.allocated + nbytes - self.reserved
        if self.caching and need > 0:
            seg = -(-need // self.block) * self.block
            ev = self.b.api("cudaMalloc", MALLOC_NS)
            self.segments.append(_Segment(ev.start, seg, self._next + (1 << 40), ev.correlation))
            self.reserved += seg
        addr = self._next
        self._next += -(-nbytes // 512) * 512
        self.allocated += nbytes
        self._live[addr] = nbytes
        self._event(nbytes, addr)
        return addr

    def free(self, addr: int, op: str | None = None) -> None:
        if op is not None:
            with self.b.op(op):
                return self.free(addr)
        nbytes = self._live.pop(addr)
        self.allocated -= nbytes
        self._event(-nbytes, addr)

    def empty_cache(self) -> None:
        """torch.cuda.empty_cache(): the unused reserved memory goes back to the driver."""
        spare = self.reserved - self.allocated
        if self.caching and spare > 0:
            ev = self.b.api("cudaFree", FREE_NS)
            self.segments.append(_Segment(ev.start, -spare, self._next + (1 << 40), ev.correlation))
            self.reserved -= spare

    def _event(self, nbytes: int, addr: int) -> None:
        self.events.append(_Event(self.b.cursor, nbytes, self.allocated,
                                  self.reserved if self.caching else 0, addr))
        self.b.advance(EVENT_NS)


def memory(b, device_type: str = "cuda") -> MemoryModel:
    """The builder's memory model (created on first use)."""
    m = getattr(b, "memory_model", None)
    if m is None:
        m = b.memory_model = MemoryModel(b, device_type)
    return m


def kineto_events(b) -> list[tuple[tuple, dict]]:
    """(sort key, event) per allocator event, for kineto_writer."""
    m = getattr(b, "memory_model", None)
    if m is None:
        return []
    dev = b.device_id if m.caching else -1
    return [((0, e.ts, 0, 0), {
        "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": b.pid,
        "tid": b.tid, "ts": _T(e.ts),
        "args": {"Total Reserved": e.reserved, "Total Allocated": e.allocated, "Bytes": e.nbytes,
                 "Device Id": dev, "Device Type": _DEVICE_TYPE.get(m.device_type, 1),
                 "Addr": e.addr}}) for e in m.events]


def write_nsys(b, con, gpid: int) -> None:
    """CUDA_GPU_MEMORY_USAGE_EVENTS rows for the model's segments (none: no table)."""
    m = getattr(b, "memory_model", None)
    if m is None or not m.segments:
        return
    con.execute(NSYS_DDL)
    con.executemany("INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?,?)", [
        (s.ts, gpid, b.device_id, 1, s.addr, 0, abs(s.nbytes), 2, 0 if s.nbytes > 0 else 1, None,
         s.correlation) for s in m.segments])
