//! Counts allocations per stage of a check (a counting global allocator, off unless asked).

use super::*;

/// mimalloc, as the service uses, with an allocation counter that is on only while
/// [`allocations_per_check`] measures.
pub(crate) struct CountingAlloc;

pub(crate) static COUNTING: AtomicBool = AtomicBool::new(false);
pub(crate) static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
pub(crate) static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the allocator the service uses.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` or `realloc` above, which forward to mimalloc.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            ALLOCATED_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        }
        // SAFETY: as for `dealloc`.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
pub(crate) static GLOBAL: CountingAlloc = CountingAlloc;

/// Allocations (count, bytes) per check of `work` over `bodies`, on this thread alone.
pub(crate) fn allocations_per_check(bodies: &[Body], work: impl Fn(&Bytes)) -> (f64, f64) {
    for body in bodies {
        work(&body.json); // warm: first-use allocations are not the hot path's
    }
    ALLOCATIONS.store(0, Ordering::Relaxed);
    ALLOCATED_BYTES.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    for body in bodies {
        work(&body.json);
    }
    COUNTING.store(false, Ordering::Relaxed);
    let n = bodies.len().max(1) as f64;
    (
        ALLOCATIONS.load(Ordering::Relaxed) as f64 / n,
        ALLOCATED_BYTES.load(Ordering::Relaxed) as f64 / n,
    )
}
