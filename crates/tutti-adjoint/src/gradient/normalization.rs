//! The chain rule from primitive terms to the library parameters of one shell.
//!
//! A shell's AOs are mu_m = sum_i d_i g_im with d_i = K c_i N_i, N_i = N_l(alpha_i) and
//! g_im the AO m built from the bare primitive r^l exp(-alpha_i r^2). With w_i = K N_i, let
//! - X_i = dE/de for mu_m -> mu_m + e w_i g_im (all m at once), and
//! - Y_i = dE/de for mu_m -> mu_m + e w_i r^2 g_im.
//!
//! Since d g_im / d alpha_i = -r^2 g_im, d ln N_i / d alpha_i = (2l+3) / (4 alpha_i) and
//! scaling every AO of the shell by (1 + e) changes E by Z = sum_j c_j X_j per unit e:
//! - dE/d alpha_i = c_i (2l+3)/(4 alpha_i) X_i - c_i Y_i + (d ln K / d alpha_i) Z,
//! - dE/d c_i = X_i + (d ln K / d c_i) Z.
//!
//! The weights w_i are never zero, so a primitive with c_i = 0 still gets both derivatives.

use crate::basis::{contraction_scale, primitive_norm, radial_gamma, Shell};

/// The weight w_i = K N_l(alpha_i) of each primitive's derivative functions.
pub(super) fn primitive_weights(shell: &Shell) -> Vec<f64> {
    let k = contraction_scale(shell.l, &shell.exponents, &shell.coefficients);
    shell
        .exponents
        .iter()
        .map(|a| k * primitive_norm(shell.l, *a))
        .collect()
}

/// (dE/d alpha_i, dE/d c_i) of one shell from its X_i (`plain`) and Y_i (`raised`).
pub(super) fn parameter_gradient(
    shell: &Shell,
    plain: &[f64],
    raised: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let l = shell.l;
    let (alpha, c) = (&shell.exponents, &shell.coefficients);
    let n = alpha.len();
    let power = l as f64 + 1.5;
    let gamma = radial_gamma(l);
    let norms: Vec<f64> = alpha.iter().map(|a| primitive_norm(l, *a)).collect();
    let dlog_norm: Vec<f64> = alpha.iter().map(|a| (2.0 * power) / (4.0 * a)).collect();
    // norm2 = sum_ij c_i N_i c_j N_j G / (2 (alpha_i + alpha_j)^power); K = norm2^(-1/2).
    let mut norm2 = 0.0;
    let mut dnorm2_dc = vec![0.0; n];
    let mut dnorm2_dalpha = vec![0.0; n];
    for i in 0..n {
        for j in 0..n {
            let sum = alpha[i] + alpha[j];
            let overlap = gamma / (2.0 * sum.powf(power));
            norm2 += c[i] * norms[i] * c[j] * norms[j] * overlap;
            // Each ordered pair (i, j) and (j, i) carries alpha_i once: hence the 2.
            dnorm2_dc[i] += 2.0 * norms[i] * c[j] * norms[j] * overlap;
            dnorm2_dalpha[i] +=
                2.0 * c[i] * c[j] * norms[j] * norms[i] * overlap * (dlog_norm[i] - power / sum);
        }
    }
    let scale: f64 = (0..n).map(|j| c[j] * plain[j]).sum();
    let grad_exponents = (0..n)
        .map(|i| {
            c[i] * dlog_norm[i] * plain[i]
                - c[i] * raised[i]
                - 0.5 * dnorm2_dalpha[i] / norm2 * scale
        })
        .collect();
    let grad_coefficients = (0..n)
        .map(|i| plain[i] - 0.5 * dnorm2_dc[i] / norm2 * scale)
        .collect();
    (grad_exponents, grad_coefficients)
}
