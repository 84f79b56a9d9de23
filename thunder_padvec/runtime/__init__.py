"""Turning generated source into running code: NVRTC or the host compiler, caches, launches."""
