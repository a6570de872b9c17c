//! Brute-force Hamming matching on the GPU (host side of `kernels/match.cu`), equal to
//! `matching::cpu` key for key: the kernels produce the same neighbour keys (the lowest
//! `distance << 23 | index`, an order-independent minimum) and the host applies the same
//! filter (the matching module's `Matcher`).
//!
//! Per call: the descriptors are copied into pinned memory and uploaded in one copy (query
//! then train, packed), the reverse keys are preset, `match_knn` runs over a grid of query
//! tiles x train splits (enough blocks to fill the GPU even for a few thousand queries),
//! `match_merge` combines the splits, and one download brings back the keys; one sync.
//! The buffers only grow (to the next power of two) when a call needs more than any before.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext};

use super::driver::buffers::{download, upload, DevBuf, HostBuf};
use super::driver::cuda_err;
use super::driver::{DeviceType, Launch};
use super::Gpu;
use crate::error::Result;
use crate::features::Descriptor;
use crate::matching::keys::NO_KEY;

/// Threads (= queries) per block of `match_knn`, and the train tile (MATCH_THREADS).
const THREADS: usize = 128;
/// Blocks per SM to aim for when splitting the train set.
const BLOCKS_PER_SM: usize = 4;
const DESC_BYTES: usize = std::mem::size_of::<Descriptor>();

/// How the work of one call is cut: `splits` ranges of `split_len` train descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    query_tiles: usize,
    splits: usize,
    split_len: usize,
}

fn plan(n: usize, m: usize, sms: usize) -> Plan {
    let query_tiles = n.div_ceil(THREADS);
    let train_tiles = m.div_ceil(THREADS);
    let want = (BLOCKS_PER_SM * sms)
        .div_ceil(query_tiles)
        .clamp(1, train_tiles.max(1));
    let split_len = train_tiles.div_ceil(want).max(1) * THREADS;
    Plan {
        query_tiles,
        splits: m.div_ceil(split_len).max(1),
        split_len,
    }
}

/// A device buffer of at least `len` values (reallocated, to a power of two, only when
/// smaller).
fn ensure_dev<T: DeviceType>(
    ctx: &Arc<CudaContext>,
    buf: &mut DevBuf<T>,
    len: usize,
) -> Result<()> {
    if buf.len() < len {
        *buf = DevBuf::empty(ctx); // free the old one first
        *buf = DevBuf::new(ctx, len.next_power_of_two().max(4096 / size_of::<T>()))?;
    }
    Ok(())
}

fn ensure_host(ctx: &Arc<CudaContext>, buf: &mut HostBuf, bytes: usize, wc: bool) -> Result<()> {
    if buf.bytes() < bytes {
        *buf = HostBuf::new(ctx, 0, wc)?;
        *buf = HostBuf::new(ctx, bytes.next_power_of_two().max(4096), wc)?;
    }
    Ok(())
}

pub struct CudaMatcher {
    /// Its own session ([`CudaMatcher::new`]) or a pipeline's ([`CudaMatcher::with_gpu`]).
    gpu: Arc<Gpu>,
    sms: usize,
    /// Query then train descriptors, packed (two `uint4`s each).
    desc: DevBuf<[u32; 4]>,
    host_desc: HostBuf,
    /// Per-split top-2 keys (only when a call has more than one split).
    partial: DevBuf<[u32; 2]>,
    /// Query top-2 keys (n uint2) then the reverse keys (m u32).
    keys: DevBuf<u32>,
    host_keys: HostBuf,
}

impl CudaMatcher {
    /// Opens the GPU and loads the kernels (`Gpu::new`); no buffer is allocated yet.
    pub fn new() -> Result<Self> {
        Self::with_gpu(Arc::new(Gpu::new()?))
    }

    /// The matcher in `gpu`'s session (a pipeline's: `matching::Matcher::for_pipeline`),
    /// its work on that session's main stream; no buffer is allocated yet.
    pub fn with_gpu(gpu: Arc<Gpu>) -> Result<Self> {
        gpu.bind()?;
        let sms = gpu
            .ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| cuda_err("reading the SM count", e))?
            .max(1) as usize;
        let c = &gpu.ctx;
        Ok(CudaMatcher {
            desc: DevBuf::empty(c),
            host_desc: HostBuf::new(c, 0, true)?,
            partial: DevBuf::empty(c),
            keys: DevBuf::empty(c),
            host_keys: HostBuf::new(c, 0, false)?,
            sms,
            gpu,
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// `matching::cpu::neighbour_keys` on the GPU: the same keys into `knn` (one pair per
    /// query) and, when `cross`, `reverse` (one per train descriptor; empty otherwise).
    /// Sizes are checked by the caller (`matching::MAX_DESCRIPTORS`).
    pub(crate) fn neighbour_keys(
        &mut self,
        query: &[Descriptor],
        train: &[Descriptor],
        cross: bool,
        knn: &mut Vec<[u32; 2]>,
        reverse: &mut Vec<u32>,
    ) -> Result<()> {
        let (n, m) = (query.len(), train.len());
        knn.clear();
        reverse.clear();
        if n == 0 || m == 0 {
            // Nothing to compute: no neighbours, no reverse best.
            knn.resize(n, [NO_KEY; 2]);
            if cross {
                reverse.resize(m, NO_KEY);
            }
            return Ok(());
        }
        self.gpu.bind()?;
        let p = plan(n, m, self.sms);
        let desc_bytes = (n + m) * DESC_BYTES;
        let knn_bytes = n * 8;
        let key_bytes = knn_bytes + if cross { m * 4 } else { 0 };
        self.ensure_buffers((n, m), (desc_bytes, key_bytes), p.splits)?;

        let staging = self.host_desc.as_mut_slice();
        staging[..n * DESC_BYTES].copy_from_slice(query.as_flattened());
        staging[n * DESC_BYTES..desc_bytes].copy_from_slice(train.as_flattened());
        let gpu = &self.gpu;
        upload(&gpu.stream, &self.host_desc, self.desc.ptr(), desc_bytes)?;
        let query_ptr = self.desc.ptr();
        let train_ptr = query_ptr.offset(n * 2);
        let knn_ptr = self.keys.ptr().cast::<[u32; 2]>();
        let reverse_ptr = self.keys.ptr().offset(2 * n);
        if cross {
            // All ones = "no key yet" for the kernel's atomicMin.
            self.keys.fill_async(&gpu.stream, 2 * n..2 * n + m, 0xff)?;
        }
        let partial_ptr = if p.splits > 1 {
            self.partial.ptr()
        } else {
            knn_ptr
        };
        let (n_i, m_i) = (n as i32, m as i32);
        let split_len = p.split_len as i32;
        let cross_i = cross as i32;
        // SAFETY: `match_knn`'s buffers are this context's, sized for this launch when the
        // stage was built.
        unsafe {
            gpu.k.matcher.match_knn(
                gpu,
                Launch::new(
                    (p.query_tiles as u32, p.splits as u32, 1),
                    (THREADS as u32, 1, 1),
                ),
                query_ptr,
                train_ptr,
                n_i,
                m_i,
                split_len,
                cross_i,
                partial_ptr,
                reverse_ptr,
            )
        }?;
        if p.splits > 1 {
            let splits = p.splits as i32;
            // SAFETY: `match_merge`'s buffers are this context's, sized for this launch when the
            // stage was built.
            unsafe {
                gpu.k.matcher.match_merge(
                    gpu,
                    Launch::new((n.div_ceil(256) as u32, 1, 1), (256, 1, 1)),
                    partial_ptr,
                    n_i,
                    splits,
                    knn_ptr,
                )
            }?;
        }
        download(&gpu.stream, knn_ptr, &mut self.host_keys, 0, key_bytes)?;
        gpu.sync()?;
        self.read_keys((n, m), cross, knn, reverse);
        Ok(())
    }

    /// Room for `n` query and `m` train descriptors (`bytes`: the descriptors', the keys')
    /// and, with more than one split, their partial keys; grown only, never shrunk.
    fn ensure_buffers(
        &mut self,
        (n, m): (usize, usize),
        (desc_bytes, key_bytes): (usize, usize),
        splits: usize,
    ) -> Result<()> {
        let ctx = self.gpu.ctx.clone();
        ensure_dev(&ctx, &mut self.desc, (n + m) * 2)?;
        ensure_host(&ctx, &mut self.host_desc, desc_bytes, true)?;
        ensure_dev(&ctx, &mut self.keys, key_bytes / 4)?;
        ensure_host(&ctx, &mut self.host_keys, key_bytes, false)?;
        if splits > 1 {
            ensure_dev(&ctx, &mut self.partial, splits * n)?;
        }
        Ok(())
    }

    /// After the sync: the `n` queries' top-2 keys into `knn` and, when `cross`, the `m`
    /// train descriptors' reverse keys (the rest of the download) into `reverse`.
    fn read_keys(
        &self,
        (n, m): (usize, usize),
        cross: bool,
        knn: &mut Vec<[u32; 2]>,
        reverse: &mut Vec<u32>,
    ) {
        let knn_bytes = n * 8;
        let bytes = self.host_keys.as_slice();
        let word = |b: &[u8]| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        knn.extend(
            bytes[..knn_bytes]
                .chunks_exact(8)
                .map(|c| [word(&c[..4]), word(&c[4..])]),
        );
        if cross {
            let rev = &bytes[knn_bytes..knn_bytes + 4 * m];
            reverse.extend(rev.chunks_exact(4).map(word));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_the_train_set_with_nonempty_splits() {
        for &(n, m, sms) in &[
            (1, 1, 132),
            (2000, 2000, 132),
            (10_000, 10_000, 132),
            (129, 5000, 16),
            (50_000, 300, 132),
            (3, 100_000, 8),
        ] {
            let p = plan(n, m, sms);
            assert!(p.query_tiles * THREADS >= n);
            assert_eq!(p.split_len % THREADS, 0);
            assert!(p.splits * p.split_len >= m, "{n} {m}: {p:?}");
            assert!((p.splits - 1) * p.split_len < m, "{n} {m}: {p:?}");
            assert!(p.splits <= 65_535);
        }
    }
}
