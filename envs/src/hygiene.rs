//! GPU hygiene: the variables every job gets unless config or the job says otherwise.

/// Memory growth instead of grabbing a whole card, the async allocator against
/// fragmentation, and PCI bus order so CUDA numbers GPUs as NVML does.
pub const GPU_DEFAULTS: [(&str, &str); 5] = [
    ("TF_FORCE_GPU_ALLOW_GROWTH", "true"),
    ("TF_GPU_ALLOCATOR", "cuda_malloc_async"),
    ("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),
    ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
    ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
];
