"""The process the package runs in: its threads, its allocator, its scratch memory."""
