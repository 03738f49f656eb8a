//! Splitting the devices of one [`Resources`] into groups, for campaigns.

use tutti_backend::{DeviceKind, DeviceRequest, KindRequest, Resources};

use crate::FitError;

/// Splits the devices `resources` selects, in order, into consecutive groups of the given
/// sizes, each as its own [`Resources`]: the same kind and caps, the group's ordinals. Give
/// them to [`crate::Execution::Groups`]; a task passes its group on to a fit with
/// [`crate::FitOptions::with_resources`].
///
/// A simulated device's thread count is set when a selection is opened: a group of `k`
/// simulated devices splits all cores among its `k` devices, so groups that run side by
/// side share the cores.
///
/// Errors: [`FitError::Devices`] when `resources` selects nothing (zero devices, an unknown
/// ordinal, a GPU request without CUDA); [`FitError::InvalidArgument`] for no sizes, a zero
/// size, or sizes that do not add up to the device count.
pub fn resource_groups(resources: &Resources, sizes: &[usize]) -> Result<Vec<Resources>, FitError> {
    let devices = resources.select_for(crate::GPU_USE)?;
    if sizes.is_empty() || sizes.contains(&0) {
        return Err(FitError::invalid(
            "sizes",
            format!("group sizes must be positive, got {sizes:?}"),
        ));
    }
    let total = sizes.iter().try_fold(0usize, |sum, &s| sum.checked_add(s));
    if total != Some(devices.len()) {
        return Err(FitError::invalid(
            "sizes",
            format!(
                "group sizes {sizes:?} add up to {}, but {} device(s) are selected",
                total.map_or_else(|| "more than usize::MAX".to_string(), |t| t.to_string()),
                devices.len()
            ),
        ));
    }
    let mut start = 0;
    Ok(sizes
        .iter()
        .map(|&size| {
            let group = &devices[start..start + size];
            start += size;
            let kind = match group[0].kind() {
                DeviceKind::Host => KindRequest::Cpu,
                DeviceKind::Cuda => KindRequest::Gpu,
            };
            resources
                .clone()
                .with_kind(kind)
                .with_devices(DeviceRequest::Ordinals(
                    group.iter().map(|device| device.ordinal()).collect(),
                ))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_split_the_selection_in_order() {
        let groups = resource_groups(&Resources::cpu(5), &[2, 3]).unwrap();
        let ordinals: Vec<Vec<usize>> = groups
            .iter()
            .map(|g| g.select().unwrap().iter().map(|d| d.ordinal()).collect())
            .collect();
        assert_eq!(ordinals, vec![vec![0, 1], vec![2, 3, 4]]);
        assert_eq!(groups[1].kind, KindRequest::Cpu);
        let capped = Resources::cpu(2).with_host_memory_cap(1 << 30);
        let groups = resource_groups(&capped, &[1, 1]).unwrap();
        assert_eq!(groups[1].host_memory_cap, Some(1 << 30));
        for sizes in [&[2, 2][..], &[5, 0], &[], &[usize::MAX, 6]] {
            let err = resource_groups(&Resources::cpu(5), sizes).unwrap_err();
            assert!(matches!(err, FitError::InvalidArgument { .. }), "{err}");
        }
        let err = resource_groups(&Resources::cpu(0), &[1]).unwrap_err();
        assert!(matches!(err, FitError::Devices(_)), "{err}");
    }
}
