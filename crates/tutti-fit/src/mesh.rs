//! A device mesh with named axes, and splitting a mesh into device groups.

use std::fmt;
use std::str::FromStr;

use tutti_backend::Device;

use crate::FitError;

/// A named axis of a [`Mesh`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Axis {
    /// Experiments are split along this axis; every device holds the whole model.
    Data,
    /// The model (its parameters and linear algebra) is split along this axis.
    Model,
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Data => "data",
            Self::Model => "model",
        })
    }
}

impl FromStr for Axis {
    type Err = FitError;
    fn from_str(name: &str) -> Result<Self, FitError> {
        match name {
            "data" => Ok(Self::Data),
            "model" => Ok(Self::Model),
            other => Err(FitError::Mesh(format!(
                "unknown axis '{other}': expected 'data' or 'model'"
            ))),
        }
    }
}

/// Devices arranged on named axes: `data` alone, `model` alone, or (`data`, `model`) with a
/// shape `(n_data, n_model)`. Devices are laid out row-major: device `d * n_model + m` has
/// data index `d` and model index `m`.
#[derive(Clone, Debug)]
pub struct Mesh {
    devices: Vec<Device>,
    axes: Vec<(Axis, usize)>,
}

impl Mesh {
    /// A mesh of `devices` with these axes and sizes.
    ///
    /// Errors: no devices, no axes, a repeated axis, a zero size, or sizes whose product is
    /// not the device count.
    pub fn new(devices: Vec<Device>, axes: &[(Axis, usize)]) -> Result<Self, FitError> {
        if devices.is_empty() {
            return Err(FitError::Mesh("a mesh needs at least one device".into()));
        }
        if axes.is_empty() || axes.len() > 2 {
            return Err(FitError::Mesh(format!(
                "a mesh has one or two axes (data, model), got {}",
                axes.len()
            )));
        }
        if axes.len() == 2 && axes[0].0 == axes[1].0 {
            return Err(FitError::Mesh(format!(
                "axis '{}' appears twice",
                axes[0].0
            )));
        }
        if let Some((axis, _)) = axes.iter().find(|(_, size)| *size == 0) {
            return Err(FitError::Mesh(format!("axis '{axis}' has size 0")));
        }
        let product: usize = axes.iter().map(|(_, size)| size).product();
        if product != devices.len() {
            let shape: Vec<String> = axes.iter().map(|(a, s)| format!("{a}={s}")).collect();
            return Err(FitError::Mesh(format!(
                "shape ({}) holds {product} devices, but {} were given",
                shape.join(", "),
                devices.len()
            )));
        }
        Ok(Self {
            devices,
            axes: axes.to_vec(),
        })
    }

    /// A mesh with axes given by name (`"data"`, `"model"`), e.g. from a command line.
    pub fn from_names(devices: Vec<Device>, axes: &[(&str, usize)]) -> Result<Self, FitError> {
        let axes = axes
            .iter()
            .map(|(name, size)| Ok((name.parse::<Axis>()?, *size)))
            .collect::<Result<Vec<_>, FitError>>()?;
        Self::new(devices, &axes)
    }

    /// All devices on the data axis.
    pub fn data(devices: Vec<Device>) -> Result<Self, FitError> {
        let n = devices.len();
        Self::new(devices, &[(Axis::Data, n)])
    }

    /// The devices, row-major.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The axes and their sizes, in order.
    pub fn axes(&self) -> &[(Axis, usize)] {
        &self.axes
    }

    /// The size of `axis` (1 for an axis the mesh does not have).
    pub fn axis_size(&self, axis: Axis) -> usize {
        self.axes
            .iter()
            .find(|(a, _)| *a == axis)
            .map_or(1, |(_, size)| *size)
    }

    /// For each data index, the devices that share it (one model group each), in order.
    pub fn data_groups(&self) -> Vec<Vec<Device>> {
        let n_model = self.axis_size(Axis::Model);
        self.devices
            .chunks(n_model)
            .map(<[Device]>::to_vec)
            .collect()
    }
}

/// Splits `mesh`'s devices, in order, into consecutive groups of the given sizes.
///
/// Errors: a zero size, or sizes that do not add up to the device count.
pub fn mesh_groups(mesh: &Mesh, sizes: &[usize]) -> Result<Vec<Vec<Device>>, FitError> {
    if sizes.is_empty() || sizes.contains(&0) {
        return Err(FitError::Mesh(format!(
            "group sizes must be positive, got {sizes:?}"
        )));
    }
    let total: usize = sizes.iter().sum();
    if total != mesh.devices.len() {
        return Err(FitError::Mesh(format!(
            "group sizes {sizes:?} add up to {total}, but the mesh has {} devices",
            mesh.devices.len()
        )));
    }
    let mut start = 0;
    Ok(sizes
        .iter()
        .map(|&size| {
            let group = mesh.devices[start..start + size].to_vec();
            start += size;
            group
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tutti_backend::Resources;

    fn devices(n: usize) -> Vec<Device> {
        Resources::cpu(n).select().unwrap()
    }

    #[test]
    fn shapes_must_match_the_device_count() {
        let mesh = Mesh::new(devices(4), &[(Axis::Data, 2), (Axis::Model, 2)]).unwrap();
        assert_eq!(mesh.axis_size(Axis::Data), 2);
        let groups = mesh.data_groups();
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[1][0].index(), 2);
        let err = Mesh::new(devices(4), &[(Axis::Data, 3)]).unwrap_err();
        assert!(err.to_string().contains("data=3") && err.to_string().contains("4 were given"));
        let err = Mesh::new(devices(4), &[(Axis::Data, 2), (Axis::Data, 2)]).unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
        let err = Mesh::from_names(devices(2), &[("pipeline", 2)]).unwrap_err();
        assert!(err.to_string().contains("unknown axis 'pipeline'"), "{err}");
        assert!(Mesh::new(devices(2), &[(Axis::Model, 0)]).is_err());
    }

    #[test]
    fn mesh_groups_split_in_order() {
        let mesh = Mesh::data(devices(5)).unwrap();
        let groups = mesh_groups(&mesh, &[2, 3]).unwrap();
        let indices: Vec<Vec<usize>> = groups
            .iter()
            .map(|g| g.iter().map(Device::index).collect())
            .collect();
        assert_eq!(indices, vec![vec![0, 1], vec![2, 3, 4]]);
        assert!(mesh_groups(&mesh, &[2, 2]).is_err());
        assert!(mesh_groups(&mesh, &[5, 0]).is_err());
    }
}
