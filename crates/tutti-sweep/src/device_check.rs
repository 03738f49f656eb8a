//! The device executor of the sweep's contractions against the host path, on random tensors:
//! what the tests (simulated devices, a GPU) and the `sweep_device` benchmark call. Not a
//! stable API.

use std::time::Instant;

use faer::Par;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tutti_backend::{BackendError, Complex64, Device};

use crate::device_tensor::{execute_on_device, DeviceTensor};
use crate::tensor::{contract_strided, Axis, Buffers, ContractionPlan, Tensor};
use crate::{Scalar, SweepError};

/// One contraction run both ways.
#[derive(Clone, Debug)]
pub struct ContractionCheck {
    /// The stack, the sweep step and the conjugation flag, e.g. `H psi: env x core 1, conj`.
    pub name: String,
    /// `||device - host|| / ||host||` (Frobenius; 0 when both are zero).
    pub relative_error: f64,
    /// Whether the two results have the same bits.
    pub bitwise: bool,
}

/// A stack's shapes at one site: per layer the left and right bonds, and the legs
/// `Phys(0)..=Phys(L)`.
struct SiteShape {
    name: &'static str,
    left: Vec<usize>,
    right: Vec<usize>,
    phys: Vec<usize>,
}

fn shapes() -> Vec<SiteShape> {
    let shape = |name, left: &[usize], right: &[usize], phys: &[usize]| SiteShape {
        name,
        left: left.to_vec(),
        right: right.to_vec(),
        phys: phys.to_vec(),
    };
    vec![
        shape("psi", &[5], &[6], &[2, 1]),
        shape("H psi", &[3, 5], &[4, 6], &[2, 2, 1]),
        shape("H psi, D_H 8", &[8, 24], &[8, 24], &[2, 2, 1]),
        shape("A B psi", &[2, 3, 5], &[3, 2, 4], &[2, 3, 2, 1]),
        shape("A B", &[2, 3], &[3, 4], &[2, 3, 2]),
        shape("phi A", &[3, 4], &[2, 5], &[1, 2, 3]),
    ]
}

fn random<T: Scalar>(rng: &mut ChaCha8Rng, dims: Vec<usize>, axes: Vec<Axis>) -> Tensor<T> {
    let len = dims.iter().product();
    let data = (0..len).map(|_| T::gaussian(rng)).collect();
    Tensor::new(data, dims, axes)
}

/// One contraction: its name, `a`, `b` and the result's axes.
type Step<T> = (String, Tensor<T>, Tensor<T>, Vec<Axis>);

/// The operands and result orders of every `contract_strided` call of one site of the sweep
/// (`distributed.rs`: `env_times_cores`, `s_times_cores`, the sketched rows of Y, the
/// projection of the next S), on random tensors of `shape`, each step fed the host result of
/// the step before.
fn site_contractions<T: Scalar>(shape: &SiteShape, rng: &mut ChaCha8Rng, par: Par) -> Vec<Step<T>> {
    let depth = shape.left.len();
    let (columns, chi, rows) = (4usize, 3usize, 3usize);
    let cores: Vec<Tensor<T>> = (0..depth)
        .map(|l| {
            let dims = vec![
                shape.left[l],
                shape.phys[l],
                shape.phys[l + 1],
                shape.right[l],
            ];
            let axes = vec![
                Axis::Left(l),
                Axis::Phys(l),
                Axis::Phys(l + 1),
                Axis::Right(l),
            ];
            random(rng, dims, axes)
        })
        .collect();
    let mut steps = Vec::new();
    let mut host = |name: String, a: &Tensor<T>, b: &Tensor<T>, out: Vec<Axis>| {
        let result = contract_strided(a, false, b, &out, par, &mut Buffers::default());
        steps.push((name, a.clone(), b.clone(), out));
        result
    };
    // env_times_cores.
    let mut env_dims = vec![columns];
    env_dims.extend(&shape.left);
    let mut env_axes = vec![Axis::Col];
    env_axes.extend((0..depth).map(Axis::Left));
    let env = random::<T>(rng, env_dims, env_axes);
    let bottom = depth - 1;
    let mut tail = vec![Axis::Col, Axis::Phys(depth), Axis::Right(bottom)];
    let mut out: Vec<Axis> = (0..bottom).map(Axis::Left).collect();
    out.push(Axis::Phys(bottom));
    out.extend(tail.iter().copied());
    let mut t = host(format!("env x core {bottom}"), &env, &cores[bottom], out);
    for l in (0..bottom).rev() {
        let mut out: Vec<Axis> = (0..l).map(Axis::Left).collect();
        out.extend([Axis::Phys(l), Axis::Right(l)]);
        out.extend(tail.iter().copied());
        t = host(format!("env x cores, core {l}"), &t, &cores[l], out);
        tail.insert(0, Axis::Right(l));
    }
    // s_times_cores.
    let order = |l: usize, tail: &[Axis]| -> Vec<Axis> {
        let mut out: Vec<Axis> = (0..l.saturating_sub(1)).map(Axis::Right).collect();
        out.push(Axis::Phys(l));
        if l >= 1 {
            out.push(Axis::Right(l - 1));
        }
        out.push(Axis::Left(l));
        out.extend(tail.iter().copied());
        out
    };
    let mut s_dims = vec![chi];
    s_dims.extend(&shape.right);
    let mut s_axes = vec![Axis::Bond];
    s_axes.extend((0..depth).map(Axis::Right));
    let s_env = random::<T>(rng, s_dims, s_axes);
    let mut tail = vec![Axis::Phys(depth), Axis::Bond];
    let mut x = host(
        format!("S x core {bottom}"),
        &s_env,
        &cores[bottom],
        order(bottom, &tail),
    );
    for l in (0..bottom).rev() {
        tail.insert(0, Axis::Left(l + 1));
        x = host(
            format!("S x cores, core {l}"),
            &x,
            &cores[l],
            order(l, &tail),
        );
    }
    // The sketched rows of Y, and the projection of the next S by a new core's rows.
    host(
        "env x X (Y)".to_string(),
        &env,
        &x,
        vec![Axis::Phys(0), Axis::Col, Axis::Phys(depth), Axis::Bond],
    );
    let v = random::<T>(
        rng,
        vec![rows, shape.phys[0], shape.phys[depth], chi],
        vec![Axis::Row, Axis::Phys(0), Axis::Phys(depth), Axis::Bond],
    );
    let mut projected = vec![Axis::Row];
    projected.extend((0..depth).map(Axis::Left));
    host("V x X (next S)".to_string(), &v, &x, projected);
    steps
}

fn compare<T: Scalar>(device: &T, host: &T) -> (f64, f64) {
    ((*device - *host).abs2(), host.abs2())
}

fn checks<T: Scalar>(device: &Device, seed: u64) -> Result<Vec<ContractionCheck>, SweepError> {
    let pool = device.thread_pool()?;
    let par = match device.threads() {
        0 | 1 => Par::Seq,
        threads => Par::rayon(threads),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::new();
    for shape in shapes() {
        let steps = pool.install(|| site_contractions::<T>(&shape, &mut rng, par));
        for (step, a, b, order) in steps {
            let plan = ContractionPlan::new(&a, &b, &order);
            let (a_device, b_device) = (
                DeviceTensor::upload(device, &a)?,
                DeviceTensor::upload(device, &b)?,
            );
            for conj in [false, true] {
                let host =
                    pool.install(|| plan.execute(&a, conj, &b, par, &mut Buffers::default()));
                let got = execute_on_device(&plan, &a_device, conj, &b_device)?.download()?;
                if got.dims != host.dims || got.axes != host.axes {
                    return Err(SweepError::Backend(BackendError::InvalidArgument {
                        op: "device contraction",
                        detail: format!("{step}: result {:?} vs host {:?}", got.axes, host.axes),
                    }));
                }
                let (diff, norm) = got
                    .data
                    .iter()
                    .zip(&host.data)
                    .map(|(g, h)| compare(g, h))
                    .fold((0.0, 0.0), |(d, n), (x, y)| (d + x, n + y));
                let relative_error = if norm > 0.0 {
                    (diff / norm).sqrt()
                } else {
                    diff.sqrt()
                };
                out.push(ContractionCheck {
                    name: format!("{}: {step}{}", shape.name, if conj { ", conj" } else { "" }),
                    relative_error,
                    bitwise: got.data == host.data,
                });
            }
        }
    }
    Ok(out)
}

/// Every contraction of one sweep site for several stacks (an MPS, H psi, A B psi, an
/// operator product, a bra times an operator), `a` conjugated and not, `f64` (or complex128
/// when `complex`): the device executor on `device` against the host's `contract_strided`.
///
/// Errors: a backend error of the device path.
pub fn sweep_contractions(
    device: &Device,
    complex: bool,
    seed: u64,
) -> Result<Vec<ContractionCheck>, SweepError> {
    if complex {
        checks::<Complex64>(device, seed)
    } else {
        checks::<f64>(device, seed)
    }
}

/// Seconds (best of `repeats`) of the left-to-right step of one site of H psi with bonds
/// `d_psi` and `d_h` and `width` sketch columns (the environment times the state's core, then
/// times H's core: `env_times_cores`), on the host path in `device`'s thread pool and on
/// `device` through the executor (operands resident): `(host, device)`.
///
/// Errors: a backend error of the device path.
pub fn site_contraction_seconds(
    device: &Device,
    d_psi: usize,
    d_h: usize,
    width: usize,
    repeats: usize,
) -> Result<(f64, f64), SweepError> {
    let pool = device.thread_pool()?;
    let par = match device.threads() {
        0 | 1 => Par::Seq,
        threads => Par::rayon(threads),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let env = random::<f64>(
        &mut rng,
        vec![width, d_h, d_psi],
        vec![Axis::Col, Axis::Left(0), Axis::Left(1)],
    );
    let h = random::<f64>(
        &mut rng,
        vec![d_h, 2, 2, d_h],
        vec![Axis::Left(0), Axis::Phys(0), Axis::Phys(1), Axis::Right(0)],
    );
    let psi = random::<f64>(
        &mut rng,
        vec![d_psi, 2, 1, d_psi],
        vec![Axis::Left(1), Axis::Phys(1), Axis::Phys(2), Axis::Right(1)],
    );
    let first_out = [
        Axis::Left(0),
        Axis::Phys(1),
        Axis::Col,
        Axis::Phys(2),
        Axis::Right(1),
    ];
    let second_out = [
        Axis::Phys(0),
        Axis::Right(0),
        Axis::Col,
        Axis::Phys(2),
        Axis::Right(1),
    ];
    let first = ContractionPlan::new(&env, &psi, &first_out);
    let middle = contract_strided(
        &env,
        false,
        &psi,
        &first_out,
        Par::Seq,
        &mut Buffers::default(),
    );
    let second = ContractionPlan::new(&middle, &h, &second_out);
    let best = |mut run: Box<dyn FnMut() -> Result<(), SweepError> + '_>| {
        let mut best = f64::INFINITY;
        for _ in 0..repeats.max(1) {
            let start = Instant::now();
            run()?;
            best = best.min(start.elapsed().as_secs_f64());
        }
        Ok::<f64, SweepError>(best)
    };
    let mut buffers = Buffers::default();
    let host = best(Box::new(|| {
        pool.install(|| {
            let t = first.execute(&env, false, &psi, par, &mut buffers);
            let u = second.execute(&t, false, &h, par, &mut buffers);
            buffers.give(t.data);
            buffers.give(u.data);
        });
        Ok(())
    }))?;
    let (env_d, psi_d, h_d) = (
        DeviceTensor::upload(device, &env)?,
        DeviceTensor::upload(device, &psi)?,
        DeviceTensor::upload(device, &h)?,
    );
    let on_device = best(Box::new(|| {
        let t = execute_on_device(&first, &env_d, false, &psi_d)?;
        execute_on_device(&second, &t, false, &h_d)?;
        device.synchronize()?;
        Ok(())
    }))?;
    Ok((host, on_device))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tutti_backend::Resources;

    #[test]
    fn the_executor_on_simulated_devices_matches_the_host() {
        for count in 1..=4 {
            // Each of `count` simulated devices, with its share of the cores.
            for device in Resources::cpu(count).select().unwrap() {
                let threads = device.threads();
                for complex in [false, true] {
                    let checks = sweep_contractions(&device, complex, 7).unwrap();
                    assert!(checks.len() > 40, "{} checks", checks.len());
                    let worst = checks
                        .iter()
                        .max_by(|x, y| x.relative_error.total_cmp(&y.relative_error))
                        .unwrap();
                    assert!(
                        worst.relative_error <= 1e-13,
                        "{threads} threads, complex {complex}: {worst:?}"
                    );
                    // The executor runs the very same faer products as the host: the same bits.
                    let bitwise = checks.iter().filter(|c| c.bitwise).count();
                    assert_eq!(
                        bitwise,
                        checks.len(),
                        "{threads} threads, complex {complex}"
                    );
                    println!(
                    "{threads} threads, complex {complex}: {} contractions, worst {:.2e} ({}), \
                     {bitwise} bitwise equal",
                    checks.len(),
                    worst.relative_error,
                    worst.name
                );
                }
            }
        }
    }
}
