"""The tierkv client.

Thread safety: one ``Client`` may be shared by threads; its calls are
serialised on one connection (the GIL is released while a call waits or
copies). For parallel transfers give each thread its own ``Client``. A client
must not be used across ``fork()``: each process opens its own.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence, Union

from . import _tierkv
from .errors import from_code

Key = Union[str, bytes]
Buffer = Any  # bytes, bytearray, memoryview, numpy array: any C-contiguous buffer


def _tensor_region(obj: Any) -> tuple[int, int] | None:
    """``(address, nbytes)`` of a CPU torch tensor (which has no buffer
    interface); ``None`` for anything else. Raises ``ValueError`` for a tensor
    that is not contiguous or not in host memory."""
    if not (hasattr(obj, "data_ptr") and hasattr(obj, "element_size")
            and hasattr(obj, "is_contiguous")):
        return None
    device = getattr(getattr(obj, "device", None), "type", "cpu")
    if device != "cpu":
        raise ValueError(f"a tensor on {device} is not in host memory: copy it to the CPU first")
    if not obj.is_contiguous():
        raise ValueError("the tensor is not contiguous: use .contiguous() first")
    return obj.data_ptr(), obj.element_size() * obj.nelement()


def _device_region(obj: Any, writable: bool) -> tuple[int, int]:
    """``(device address, nbytes)`` of GPU memory: a CUDA torch tensor, any
    object with ``__cuda_array_interface__`` (CuPy, Numba, ...), or a
    ``(device address, length)`` pair. Raises ``ValueError`` for memory that is
    not C-contiguous, read-only where it would be written, or a tensor in host
    memory, and ``TypeError`` for anything else."""
    if isinstance(obj, tuple):
        if len(obj) != 2:
            raise TypeError("a device region is (device address, length)")
        return int(obj[0]), int(obj[1])
    device = getattr(getattr(obj, "device", None), "type", None)
    if device == "cpu":
        raise ValueError("the tensor is in host memory: use put/get_into for it")
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(f"{type(obj).__name__} is not GPU memory: pass a CUDA tensor, an object "
                        "with __cuda_array_interface__, or (device address, length)")
    address, readonly = cai["data"]
    if writable and readonly:
        raise ValueError("the GPU memory is read-only")
    shape = tuple(cai["shape"])
    itemsize = int(cai["typestr"][2:])
    strides = cai.get("strides")
    count = 1
    for n in shape:
        count *= n
    if strides is not None and count > 1:
        expected, step = [], itemsize
        for n in reversed(shape):
            expected.append(step)
            step *= n
        if any(s != e for s, e, n in zip(strides, reversed(expected), shape) if n > 1):
            raise ValueError("the GPU memory is not C-contiguous: use .contiguous() first")
    return int(address), count * itemsize


def _device_parts(obj: Any, writable: bool) -> list[tuple[int, int]]:
    """One value's GPU parts: a list of regions, or one region."""
    if isinstance(obj, list):
        return [_device_region(p, writable) for p in obj]
    return [_device_region(obj, writable)]


def _target(obj: Any) -> Any:
    """A target the extension takes: a torch tensor becomes ``(address, nbytes)``."""
    region = _tensor_region(obj)
    return obj if region is None else region


def _error(st: _tierkv.Status) -> Exception:
    """The exception for a batch item's failed status."""
    return from_code(st.code, st.name, st.message)


class Client:
    """A connection to a tierkv manager.

    ``address`` is ``"unix:/path/to.sock"`` (same host: values move through the
    manager's shared memory with one copy) or ``"tcp://host:port"``. ``tenant``
    is the namespace of calls that name none. ``rank`` is the engine's device
    rank, used to label the manager's per-rank metrics.

    Raises :class:`tierkv.Unavailable` when nobody listens at ``address``.
    """

    def __init__(self, address: str, tenant: str = "default", *, rank: int = 0,
                 timeout_ms: int = 30000, client_name: str = "python", namespace: str = "",
                 pipeline_commits: bool = False, lease_free_reads: bool = True,
                 device_copies: str = "", cuda_library: str = "",
                 device_puts_in_hbm: bool = True):
        """``namespace``: the storage namespace recorded with every object this client
        puts (``tierkv:v1:<64 lowercase hex>``, see :func:`tierkv.derive_namespace`);
        a malformed one raises :class:`tierkv.InvalidArgument`.

        ``pipeline_commits`` (Unix socket only): ``put``, ``upsert`` and ``put_from``
        return once the value is copied and its commit sent, without waiting for the
        answer (one round trip per put instead of two). A commit that failed is
        raised by the next call on this client, which then does nothing else, or by
        :meth:`flush`; until then other clients may not see the object yet.

        ``lease_free_reads`` (Unix socket only): gets copy without a read lease and
        check the copy against the manager's generation table; a copy whose range
        was freed meanwhile is read again under a lease (``docs/protocol.md``).

        ``device_copies``: GPU memory for the ``*_device`` calls: ``"cuda"`` (the
        NVIDIA driver, loaded now; :class:`tierkv.Unavailable` names the cause when
        it cannot be), ``"host"`` (stand-in devices whose addresses are host
        addresses, for tests without a GPU), or ``""`` (none: those calls raise
        :class:`tierkv.NotSupported`). ``cuda_library``: the driver library to
        load (``""``: ``libcuda.so.1``). With a manager that has an HBM tier the
        client maps its pools over the Unix socket: device gets of values held
        there copy GPU to GPU, and so do device puts unless
        ``device_puts_in_hbm`` is false (they then go to DRAM)."""
        self._c = _tierkv.Client(address, tenant, rank, timeout_ms, client_name, namespace,
                                 pipeline_commits, lease_free_reads, device_copies,
                                 cuda_library, device_puts_in_hbm)
        self.address = address

    # -- lifecycle ----------------------------------------------------------
    def close(self) -> None:
        """Closes the connection; later calls raise :class:`tierkv.Unavailable`."""
        self._c.close()

    def flush(self) -> None:
        """Waits for the answer to a pipelined commit still unanswered and raises
        its failure (the error class of its code, naming the key); returns at once
        when there is none. Call it before telling another process a put is done."""
        self._c.flush()

    @property
    def closed(self) -> bool:
        return self._c.closed

    @property
    def shared_memory(self) -> bool:
        """True when connected over a Unix socket with the pool mapped."""
        return self._c.shared_memory

    @property
    def tenant(self) -> str:
        return self._c.tenant

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"tierkv.Client({self.address!r}, tenant={self.tenant!r}, {state})"

    # -- writes -------------------------------------------------------------
    def put(self, key: Key, value: Buffer, *, group_id: str | None = None,
            tenant: str | None = None) -> None:
        """Stores a new object. Raises :class:`tierkv.Duplicated` if the key exists.
        ``value``: a buffer (bytes, bytearray, memoryview, numpy array) or a
        contiguous CPU torch tensor; its bytes are copied once, into the pool."""
        self._put(key, value, group_id, tenant, False)

    def upsert(self, key: Key, value: Buffer, *, group_id: str | None = None,
               tenant: str | None = None) -> None:
        """Stores or replaces an object."""
        self._put(key, value, group_id, tenant, True)

    def _put(self, key: Key, value: Buffer, group_id: str | None, tenant: str | None,
             upsert: bool) -> None:
        region = _tensor_region(value)
        if region is None:
            self._c.put(key, value, group_id, tenant, upsert)
        else:
            self._c.put_from(key, region[0], region[1], group_id, tenant, upsert)

    def put_from(self, key: Key, source: Buffer | int, length: int | None = None, *,
                 group_id: str | None = None, tenant: str | None = None,
                 upsert: bool = False) -> None:
        """Stores ``length`` bytes from a buffer, or from a raw address (an int)
        of memory the caller owns, or from a CPU torch tensor, copying them once
        into the manager's pool."""
        region = _tensor_region(source)
        if region is not None:
            source, length = region[0], region[1] if length is None else min(length, region[1])
        self._c.put_from(key, source, length, group_id, tenant, upsert)

    def batch_put(self, items: Iterable[tuple], *, tenant: str | None = None,
                  upsert: bool = False) -> list[_tierkv.Status]:
        """Stores ``(key, value)`` or ``(key, value, group_id)`` items in one round
        trip per chunk. Returns one :class:`tierkv.Status` per item (truthy when OK)."""
        return self._c.batch_put(list(items), tenant, upsert)

    def batch_put_from(self, items: Iterable[tuple], *, tenant: str | None = None,
                       upsert: bool = False) -> list[_tierkv.Status]:
        """Like :meth:`batch_put` with ``(key, buffer)`` or ``(key, address, length)`` items."""
        return self._c.batch_put_from(list(items), tenant, upsert)

    # -- reads --------------------------------------------------------------
    def get(self, key: Key, *, tenant: str | None = None) -> bytes | None:
        """The value as ``bytes``, or ``None`` when the key is not stored."""
        return self._c.get(key, tenant)

    def get_into(self, key: Key, target: Buffer | int, length: int | None = None, *,
                 tenant: str | None = None) -> int | None:
        """Copies the value once into a writable buffer (bytearray, numpy array,
        ...), a contiguous CPU torch tensor, or a raw address (an int) of
        ``length`` bytes, and returns its size; ``None`` on a miss. Raises
        :class:`tierkv.TooLarge` when the target is smaller than the value."""
        region = _tensor_region(target)
        if region is not None:
            target, length = region[0], region[1] if length is None else min(length, region[1])
        return self._c.get_into(key, target, length, tenant)

    def register_buffer(self, size: int) -> _tierkv.RegisteredBuffer:
        """Allocates ``size`` bytes of memory shared with the manager (Unix
        socket only) and registers it: a get into any part of it
        (:meth:`get_into`, :meth:`batch_get_into`, :meth:`batch_get_parts`) is
        answered by the manager writing the value there, one copy out of its
        pool, or, for a value another manager holds, read by the data channel
        straight into it with no copy kept on this manager. The result exports
        writable bytes through the buffer protocol (``memoryview(buf)``,
        ``numpy.frombuffer(buf, dtype=...)``, ``torch.frombuffer(buf,
        dtype=...)``): use it as the memory the values are wanted in (an
        engine's host KV pool). It stays mapped while it, or any buffer taken
        from it, lives. Raises :class:`tierkv.NotSupported` over TCP or when the
        manager takes none, :class:`tierkv.NoSpace` over its budgets."""
        return self._c.register_buffer(size)

    def unregister_buffer(self, buffer: _tierkv.RegisteredBuffer | int) -> None:
        """The manager forgets the buffer (or its ``id``); gets into it take the
        plain path from then on. Its memory stays mapped while referenced."""
        self._c.unregister_buffer(buffer)

    def get_view(self, key: Key, *, tenant: str | None = None) -> _tierkv.ValueView | None:
        """A zero-copy, read-only view of the value where it lies in the
        manager's shared pool (Unix socket only), or ``None`` on a miss. Use it
        as a context manager, which yields a ``memoryview``::

            with client.get_view(key) as view:
                array = numpy.frombuffer(view, dtype=numpy.float16)

        The value is pinned until the view is released (the ``with`` block
        ends, or :meth:`ValueView.release`): a remove, upsert or eviction
        meanwhile does not touch its bytes. After the release the memoryview
        raises ``ValueError``; buffers taken from it before (a numpy array, a
        slice) keep the pin, and their bytes, until they are dropped. A
        connection holds at most the manager's ``--max-pinned-bytes``
        (:class:`tierkv.NoSpace` over it). Over TCP raises
        :class:`tierkv.NotSupported`. Counted as a get."""
        return self._c.get_view(key, tenant)

    def batch_get(self, keys: Sequence[Key], *, tenant: str | None = None) -> list[bytes | None]:
        """Values in key order, ``None`` for misses. A real error (not a miss)
        raises the matching exception."""
        return self._c.batch_get(list(keys), tenant)

    def batch_get_into(self, keys: Sequence[Key], targets: Sequence[Buffer | tuple], *,
                       tenant: str | None = None, exact: bool = False) -> list[_tierkv.Status]:
        """Copies each value into its target (a buffer or ``(address, length)``).
        Returns one status per key; ``status.size`` is the value's length. With
        ``exact`` a value whose size is not its target's fails with
        ``INVALID_ARGUMENT`` and nothing is copied into that target. A target may
        also be a contiguous CPU torch tensor."""
        return self._c.batch_get_into(list(keys), [_target(t) for t in targets], tenant, exact)

    # -- scatter/gather -----------------------------------------------------
    def batch_put_parts(self, keys: Sequence[Key], parts: Sequence[Sequence[Buffer | tuple]], *,
                        tenant: str | None = None, upsert: bool = False) -> list[_tierkv.Status]:
        """Stores one object per key, gathered from its parts: ``parts[i]`` lists
        buffers or ``(address, length)`` pairs whose concatenation, in order, is
        the value of ``keys[i]``. One round trip per chunk, one copy per part
        (Unix socket). Returns one :class:`tierkv.Status` per key."""
        return self._c.batch_put_parts(list(keys), [list(p) for p in parts], tenant, upsert)

    def put_parts(self, key: Key, parts: Sequence[Buffer | tuple], *, tenant: str | None = None,
                  upsert: bool = False) -> None:
        """Stores one object gathered from its parts (see :meth:`batch_put_parts`);
        raises as :meth:`put` does."""
        st = self._c.batch_put_parts([key], [list(parts)], tenant, upsert)[0]
        if not st.ok:
            raise _error(st)

    def get_parts(self, key: Key, parts: Sequence[Buffer | tuple], *,
                  tenant: str | None = None) -> int | None:
        """Reads one object into its parts (see :meth:`batch_get_parts`); returns
        its size, ``None`` on a miss; raises for any other failure
        (:class:`tierkv.InvalidArgument` when the parts' total is not its size)."""
        st = self._c.batch_get_parts([key], [list(parts)], tenant)[0]
        if st.ok:
            return st.size
        if st.name == "NOT_FOUND":
            return None
        raise _error(st)

    def batch_put_regions(self, keys: Sequence[Key], addresses: Sequence[int],
                          lengths: Sequence[int], *, tenant: str | None = None,
                          upsert: bool = False) -> list[_tierkv.Status]:
        """:meth:`batch_put_parts` with flat lists: ``len(addresses) // len(keys)``
        consecutive regions per key (the form an engine's page table yields).
        Raises ``ValueError`` when the counts do not divide evenly."""
        return self._c.batch_put_regions(list(keys), list(addresses), list(lengths), tenant,
                                         upsert)

    def batch_get_parts(self, keys: Sequence[Key], parts: Sequence[Sequence[Buffer | tuple]], *,
                        tenant: str | None = None) -> list[_tierkv.Status]:
        """Reads each object into its parts, in order (writable buffers or
        ``(address, length)`` pairs). The value must be exactly the parts' total
        size: any other size fails that key with ``INVALID_ARGUMENT`` and nothing
        is copied into its parts. ``status.size`` is the value's length."""
        return self._c.batch_get_parts(list(keys), [list(p) for p in parts], tenant)

    def batch_get_regions(self, keys: Sequence[Key], addresses: Sequence[int],
                          lengths: Sequence[int], *, tenant: str | None = None
                          ) -> list[_tierkv.Status]:
        """:meth:`batch_get_parts` with flat lists, as :meth:`batch_put_regions`."""
        return self._c.batch_get_regions(list(keys), list(addresses), list(lengths), tenant)

    # -- GPU memory (device_copies; docs/hbm.md) ------------------------------
    # Each call returns once the bytes are in place; it does not wait for work
    # queued on the caller's streams: synchronise the stream that produced a
    # put's source first (e.g. torch.cuda.current_stream().synchronize()).
    def put_from_device(self, key: Key, source: Any, *, group_id: str | None = None,
                        tenant: str | None = None, upsert: bool = False) -> None:
        """Stores GPU memory: a CUDA tensor (or ``__cuda_array_interface__``
        object, or ``(device address, length)``), or a list of them whose
        concatenation is the value."""
        st = self._c.batch_put_device([key], [_device_parts(source, False)], tenant, upsert)[0]
        if not st:
            raise _error(st)

    def get_into_device(self, key: Key, target: Any, *, tenant: str | None = None) -> int | None:
        """Reads the value into GPU memory (as :meth:`put_from_device`'s source);
        its size must be exactly the target's (else :class:`tierkv.InvalidArgument`,
        nothing copied). Returns the size, or ``None`` on a miss."""
        st = self._c.batch_get_device([key], [_device_parts(target, True)], tenant)[0]
        if st.name == "NOT_FOUND":
            return None
        if not st:
            raise _error(st)
        return st.size

    def batch_put_from_device(self, keys: Sequence[Key], sources: Sequence[Any], *,
                              tenant: str | None = None, upsert: bool = False
                              ) -> list[_tierkv.Status]:
        """:meth:`put_from_device` per key, in one round trip per chunk."""
        return self._c.batch_put_device(list(keys), [_device_parts(s, False) for s in sources],
                                        tenant, upsert)

    def batch_get_into_device(self, keys: Sequence[Key], targets: Sequence[Any], *,
                              tenant: str | None = None) -> list[_tierkv.Status]:
        """:meth:`get_into_device` per key; ``status.size`` is the value's length."""
        return self._c.batch_get_device(list(keys), [_device_parts(t, True) for t in targets],
                                        tenant)

    def exists(self, key: Key, *, tenant: str | None = None, local_only: bool = False) -> bool:
        """True when stored. In cluster mode also when another manager holds it
        (unless ``local_only``); raises :class:`tierkv.Unavailable` when that is
        unknown (an owner's view is incomplete, or outside the scope)."""
        return self._c.exists(key, tenant, local_only)

    def batch_exists(self, keys: Sequence[Key], *, tenant: str | None = None,
                     local_only: bool = False) -> list[bool]:
        return self._c.batch_exists(list(keys), tenant, local_only)

    def query(self, key: Key, *, tenant: str | None = None, local_only: bool = False) -> dict:
        """``{"size", "group_id", "media", "active_leases", "state",
        "lease_expires_unix_ms", "last_access_unix_ms", "namespace", "owner",
        "owner_rank"}``; ``owner`` is ``None`` when the manager asked holds it,
        else the node id of the manager that does (cluster mode). Raises
        :class:`tierkv.NotFound` on a miss."""
        return self._c.query(key, tenant, local_only)

    def batch_query(self, keys: Sequence[Key], *, tenant: str | None = None,
                    local_only: bool = False) -> list[dict | None]:
        """Query results in key order, ``None`` for misses."""
        return self._c.batch_query(list(keys), tenant, local_only)

    def list_keys(self, prefix: str = "", limit: int = 0, *,
                  tenant: str | None = None) -> list[str | bytes]:
        """Stored keys starting with ``prefix``, sorted (``bytes`` when not UTF-8)."""
        return self._c.list_keys(prefix, limit, tenant)

    # -- removal ------------------------------------------------------------
    def remove(self, key: Key, *, tenant: str | None = None) -> None:
        """Removes an object; raises :class:`tierkv.NotFound` on a miss."""
        self._c.remove(key, tenant)

    def batch_remove(self, keys: Sequence[Key], *, tenant: str | None = None) -> list[_tierkv.Status]:
        return self._c.batch_remove(list(keys), tenant)

    def remove_all(self, tenant: str | None = None, *, force: bool = False) -> dict:
        """Removes every object of the tenant; leased ones only with ``force``.
        Returns ``{"removed", "skipped", "cleared"}``."""
        return self._c.remove_all(tenant, force)
