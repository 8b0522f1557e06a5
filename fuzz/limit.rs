// Included by every target. An allocation past 512 MiB aborts, which
// libFuzzer reports as a crash with its input: its own -malloc_limit_mb
// needs a sanitizer's malloc hooks, which the stable toolchain has not.
struct Limit;

const LIMIT: usize = 512 << 20;

// SAFETY: forwards to the system allocator, refusing only by aborting.
unsafe impl std::alloc::GlobalAlloc for Limit {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.size() > LIMIT {
            std::process::abort();
        }
        std::alloc::System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.size() > LIMIT {
            std::process::abort();
        }
        std::alloc::System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        std::alloc::System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        if size > LIMIT {
            std::process::abort();
        }
        std::alloc::System.realloc(ptr, layout, size)
    }
}

#[global_allocator]
static ALLOCATOR: Limit = Limit;
