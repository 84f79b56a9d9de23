"""Loading CUBINs and launching them on PyTorch's stream, in the device's primary context.

PyTorch runs in each device's primary context; modules are loaded into that context and every
launch makes sure it is current on the calling thread (autograd runs backward on a thread of its
own). Kernel arguments are one struct of pointers, packed into a buffer that each specialization
allocates once; a call only writes the new pointers into it.
"""

from __future__ import annotations

import ctypes
import functools
import threading

from ..errors import LaunchError


@functools.cache
def _driver():
    from cuda.bindings import driver

    _check(driver.cuInit(0), "cuInit")
    return driver


def _check(result, what: str):
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise LaunchError(f"{what} failed: {err!r}")
    return values[0] if len(values) == 1 else tuple(values)


@functools.cache
def _primary_context(device: int):
    driver = _driver()
    handle = _check(driver.cuDeviceGet(device), "cuDeviceGet")
    return _check(driver.cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain")


_current = threading.local()


def make_current(device: int) -> None:
    """Makes ``device``'s primary context current on this thread."""
    _check(_driver().cuCtxSetCurrent(_primary_context(device)), "cuCtxSetCurrent")
    _current.device = device


def reset_persisting_l2(device: int) -> None:
    """Returns the L2 lines that evict_last cache policies keep (``createpolicy``, Triton's
    ``eviction_policy='evict_last'``, access policy windows) to normal priority, so that the next
    writes can evict them. Acts at once, not in stream order."""
    make_current(device)
    _check(_driver().cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache")


class ArgPack:
    """The kernel's one argument, a struct of ``n`` pointers, in a buffer reused by every call."""

    def __init__(self, n: int):
        self.values = (ctypes.c_uint64 * max(n, 1))()
        self.address = ctypes.addressof(self.values)
        self.params = (ctypes.c_void_p * 1)(self.address)  # kernelParams: one pointer to the struct
        self.params_address = ctypes.addressof(self.params)
        self.lock = threading.Lock()


class CudaModule:
    """A CUBIN loaded on one device, and its ``padvec_kernel``."""

    def __init__(self, cubin: bytes, device: int):
        self.device = device
        make_current(device)
        driver = _driver()
        self._module = _check(driver.cuModuleLoadData(cubin), "cuModuleLoadData")
        self._function = _check(driver.cuModuleGetFunction(self._module, b"padvec_kernel"), "cuModuleGetFunction")
        self._launch = driver.cuLaunchKernel
        self._success = driver.CUresult.CUDA_SUCCESS

    def resources(self, block: int) -> tuple[int, int, int]:
        """``(registers per thread, local memory bytes per thread, blocks of ``block`` threads per SM)``."""
        driver = _driver()
        attribute = driver.CUfunction_attribute
        registers = _check(driver.cuFuncGetAttribute(attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, self._function),
                           "cuFuncGetAttribute")
        local = _check(driver.cuFuncGetAttribute(attribute.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, self._function),
                       "cuFuncGetAttribute")
        blocks = _check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(self._function, block, 0),
                        "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return registers, local, blocks

    def launch(self, grid: int, block: int, params_address: int, stream: int) -> None:
        # The thread that made the context current last time keeps it, unless something else (a
        # library creating contexts of its own) changed it; then the launch fails and is retried.
        if getattr(_current, "device", None) != self.device:
            make_current(self.device)
        (err,) = self._launch(self._function, grid, 1, 1, block, 1, 1, 0, stream, params_address, 0)
        if err != self._success:
            make_current(self.device)
            (err,) = self._launch(self._function, grid, 1, 1, block, 1, 1, 0, stream, params_address, 0)
            _check((err,), "cuLaunchKernel")
