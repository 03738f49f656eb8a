//! One rank's sketched environments between the two passes, each on the tier the memory plan
//! gave it: held where the rank computes (the device tier), on the host, or in a spill file.
//!
//! The left-to-right pass makes environment k (left of site k) for k = 1..n-1 and puts it
//! away ([`Environments::put`]); the right-to-left pass takes them back in the opposite
//! order, n-1 first ([`Environments::take`]). An environment on the disk tier is written to
//! the sweep's [`SpillStore`] as raw elements (`env-r<rank>-s<site>`) and read back by a
//! loader thread ([`Prefetch`]) one site ahead of the pass, then its file is removed. The
//! bytes are the bytes: a spilled environment comes back bit for bit, so the result does not
//! depend on the tiers.

use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::{Scope, ScopedJoinHandle};

use tutti_plan::{SpillStore, Tier};

use crate::executor::Executor;
use crate::memory::try_filled_vec;
use crate::tensor::{Axis, Tensor};
use crate::{Scalar, SweepError};

/// Where each environment is.
enum Slot<T, H> {
    /// Not made yet, or taken back.
    Empty,
    /// Where the rank computes.
    Held(H),
    /// In host memory.
    Host(Tensor<T>),
    /// In the spill file of this name.
    Disk {
        file: String,
        dims: Vec<usize>,
        axes: Vec<Axis>,
    },
}

/// One rank's environments, by site.
pub(crate) struct Environments<'s, T, H> {
    /// The tier of environment k, for k in 0..n (index 0 unused).
    tiers: Vec<Tier>,
    slots: Vec<Slot<T, H>>,
    spill: Option<&'s SpillStore>,
    rank: usize,
    /// Bytes this rank wrote to spill files.
    written: u64,
}

impl<'s, T: Scalar, H> Environments<'s, T, H> {
    /// Empty slots for environments on `tiers` (by site); `spill` must be given when some
    /// tier is [`Tier::Disk`].
    pub fn new(
        tiers: Vec<Tier>,
        spill: Option<&'s SpillStore>,
        rank: usize,
    ) -> Result<Self, SweepError> {
        if spill.is_none() && tiers.contains(&Tier::Disk) {
            return Err(SweepError::InvalidStack {
                detail: "the memory plan puts environments on disk but no spill store was made"
                    .into(),
            });
        }
        let slots = tiers.iter().map(|_| Slot::Empty).collect();
        Ok(Self {
            tiers,
            slots,
            spill,
            rank,
            written: 0,
        })
    }

    /// Bytes this rank has written to spill files.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Puts environment `site` away on its tier.
    pub fn put<E>(&mut self, site: usize, env: H, exec: &mut E) -> Result<(), SweepError>
    where
        E: Executor<T, Held = H>,
    {
        let slot = match self.tier(site)? {
            Tier::Device => Slot::Held(env),
            Tier::Host => Slot::Host(exec.release(env)?),
            Tier::Disk => {
                let tensor = exec.release(env)?;
                let file = spill_name(self.rank, site);
                let store = self.store()?;
                let mut writer = store.create_file(&file)?;
                writer.write_bytes(bytemuck::cast_slice(&tensor.data))?;
                self.written = self.written.saturating_add(writer.finish()?);
                let (dims, axes) = (tensor.dims.clone(), tensor.axes.clone());
                exec.recycle_host(tensor);
                Slot::Disk { file, dims, axes }
            }
        };
        self.slots[site] = slot;
        Ok(())
    }

    /// Environment `site`, where the rank computes: from its slot, or for one on disk from
    /// `prefetch` (which reads the disk tier's environments in the order they are taken).
    pub fn take<E>(
        &mut self,
        site: usize,
        exec: &mut E,
        prefetch: &mut Option<Prefetch<'_, T>>,
    ) -> Result<H, SweepError>
    where
        E: Executor<T, Held = H>,
    {
        self.tier(site)?;
        match std::mem::replace(&mut self.slots[site], Slot::Empty) {
            Slot::Held(env) => Ok(env),
            Slot::Host(tensor) => exec.hold(tensor),
            Slot::Disk { .. } => {
                let loaded = prefetch.as_mut().ok_or_else(|| missing(site))?.next(site)?;
                exec.hold(loaded)
            }
            Slot::Empty => Err(missing(site)),
        }
    }

    /// Starts the loader of the environments on disk, in the order the right-to-left pass
    /// takes them (site n-1 first), within `scope`; `None` when none is on disk.
    pub fn prefetch<'scope>(
        &self,
        scope: &'scope Scope<'scope, '_>,
    ) -> Result<Option<Prefetch<'scope, T>>, SweepError>
    where
        's: 'scope,
    {
        let jobs: Vec<(usize, String, Vec<usize>, Vec<Axis>)> = self
            .slots
            .iter()
            .enumerate()
            .rev()
            .filter_map(|(site, slot)| match slot {
                Slot::Disk { file, dims, axes } => {
                    Some((site, file.clone(), dims.clone(), axes.clone()))
                }
                _ => None,
            })
            .collect();
        if jobs.is_empty() {
            return Ok(None);
        }
        let store: &'s SpillStore = self.store()?;
        // A rendezvous channel: the loader reads the next environment while the pass uses
        // the current one, and waits with it until it is taken; two in memory at most.
        let (sender, receiver) = sync_channel(0);
        let loader = std::thread::Builder::new()
            .name("tutti-sweep-spill".into())
            .spawn_scoped(scope, move || {
                for (site, file, dims, axes) in jobs {
                    let loaded = read_environment(store, &file, dims, axes);
                    let failed = loaded.is_err();
                    // The pass stopped (an error elsewhere): nobody wants the rest.
                    if sender.send((site, loaded)).is_err() || failed {
                        return;
                    }
                }
            })
            .map_err(|source| {
                SweepError::Plan(tutti_plan::PlanError::Io {
                    what: "starting the spill loader thread",
                    path: store.dir().to_path_buf(),
                    source,
                })
            })?;
        Ok(Some(Prefetch {
            receiver,
            _loader: loader,
        }))
    }

    fn tier(&self, site: usize) -> Result<Tier, SweepError> {
        self.tiers.get(site).copied().ok_or_else(|| missing(site))
    }

    fn store(&self) -> Result<&'s SpillStore, SweepError> {
        self.spill.ok_or_else(|| SweepError::InvalidStack {
            detail: "an environment planned on disk without a spill store".into(),
        })
    }
}

/// The loader of spilled environments, reading one ahead of the right-to-left pass.
pub(crate) struct Prefetch<'scope, T> {
    receiver: Receiver<(usize, Result<Tensor<T>, SweepError>)>,
    _loader: ScopedJoinHandle<'scope, ()>,
}

impl<T> Prefetch<'_, T> {
    /// The environment of `site`, which must be the next one the loader reads.
    fn next(&mut self, site: usize) -> Result<Tensor<T>, SweepError> {
        match self.receiver.recv() {
            Ok((read, loaded)) if read == site => loaded,
            Ok((read, _)) => Err(SweepError::InvalidStack {
                detail: format!("the spill loader read site {read} where {site} was wanted"),
            }),
            Err(_) => Err(missing(site)),
        }
    }
}

/// The spill file of `rank`'s environment at `site`.
fn spill_name(rank: usize, site: usize) -> String {
    format!("env-r{rank}-s{site}")
}

/// Reads a spilled environment back and removes its file.
fn read_environment<T: Scalar>(
    store: &SpillStore,
    file: &str,
    dims: Vec<usize>,
    axes: Vec<Axis>,
) -> Result<Tensor<T>, SweepError> {
    let len = dims.iter().product();
    let mut data = try_filled_vec(len, T::zero(), || {
        format!("a sketched environment read back from {file}")
    })?;
    store
        .open_file(file)?
        .read_bytes(bytemuck::cast_slice_mut(&mut data))?;
    store.remove_file(file)?;
    Tensor::from_parts(data, dims, axes).ok_or_else(|| SweepError::InvalidStack {
        detail: format!("the spilled environment {file} does not match its shape"),
    })
}

fn missing(site: usize) -> SweepError {
    SweepError::InvalidStack {
        detail: format!("the sketched environment of site {site} is missing"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::executor::HostExecutor;
    use crate::tensor::Buffers;

    fn env(site: usize) -> Tensor<f64> {
        let data: Vec<f64> = (0..6).map(|i| (site * 10 + i) as f64 / 3.0).collect();
        Tensor::new(data, vec![2, 3], vec![Axis::Col, Axis::Left(0)])
    }

    #[test]
    fn every_tier_gives_the_same_bits_back_and_spill_files_go() {
        let scratch = tempfile::tempdir().unwrap();
        let store = SpillStore::create(scratch.path()).unwrap();
        let tiers = vec![
            Tier::Device,
            Tier::Disk,
            Tier::Host,
            Tier::Disk,
            Tier::Device,
        ];
        let mut exec = HostExecutor {
            par: faer::Par::Seq,
            buffers: Buffers::default(),
        };
        let mut envs = Environments::new(tiers, Some(&store), 1).unwrap();
        for site in 1..5 {
            envs.put(site, env(site), &mut exec).unwrap();
        }
        assert_eq!(envs.written(), 2 * 6 * 8);
        assert_eq!(store.file_names(), ["env-r1-s1", "env-r1-s3"]);
        std::thread::scope(|scope| {
            let mut prefetch = envs.prefetch(scope).unwrap();
            for site in (1..5).rev() {
                let back = envs.take(site, &mut exec, &mut prefetch).unwrap();
                let want = env(site);
                let bits = |t: &Tensor<f64>| t.data.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&back), bits(&want), "site {site}");
                assert_eq!(back.dims, want.dims);
                assert_eq!(back.axes, want.axes);
            }
            // Taken twice: an error, not a stale tensor.
            assert!(envs.take(3, &mut exec, &mut prefetch).is_err());
        });
        assert!(store.file_names().is_empty());
        assert_eq!(store.used(), 0);
    }

    #[test]
    fn disk_without_a_store_is_refused() {
        assert!(Environments::<f64, Tensor<f64>>::new(vec![Tier::Disk], None, 0).is_err());
    }
}
