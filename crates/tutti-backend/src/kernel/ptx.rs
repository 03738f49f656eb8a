//! Reading kernel signatures back from PTX, to check them against [`Param`]s.

use super::{KernelModule, Param};
use crate::BackendError;

/// One `.entry` of a PTX module: its name and the PTX type of each `.param` (`".u64"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxEntry {
    /// The entry's name.
    pub name: String,
    /// Each parameter's PTX type, in order (`".u64"`, `".u32"`, `".f64"`, ...).
    pub params: Vec<String>,
}

/// The `.entry` functions of a PTX text, in order.
pub fn ptx_entries(ptx: &str) -> Vec<PtxEntry> {
    let mut entries = Vec::new();
    let mut rest = ptx;
    while let Some(at) = rest.find(".entry") {
        let after = &rest[at + ".entry".len()..];
        let Some(open) = after.find('(') else { break };
        let name = after[..open].trim().to_string();
        let Some(close) = after[open..].find(')') else {
            break;
        };
        let list = &after[open + 1..open + close];
        let params = list
            .split(',')
            .filter_map(|param| {
                let mut words = param.split_whitespace();
                (words.next() == Some(".param")).then(|| words.next().unwrap_or("").to_string())
            })
            .collect();
        entries.push(PtxEntry { name, params });
        rest = &after[open + close..];
    }
    entries
}

/// The PTX types a parameter may be declared with.
fn ptx_types(param: Param) -> &'static [&'static str] {
    match param {
        // Pointers on a 64-bit target.
        Param::In(_) | Param::Out(_) | Param::InOut(_) => &[".u64", ".b64"],
        Param::U32 => &[".u32", ".b32"],
        Param::I32 => &[".u32", ".s32", ".b32"],
        Param::U64 => &[".u64", ".b64"],
        Param::F64 => &[".f64"],
        Param::F32 => &[".f32"],
    }
}

/// Checks that `ptx` (compiled from `module`) has every entry of the module, each with
/// parameters of the widths its [`Param`]s say: a mismatch would be undefined behaviour on a
/// GPU, never an error.
///
/// Errors: [`BackendError::Kernel`] naming the entry and the first parameter that differs.
pub fn check_ptx_signatures(module: &KernelModule, ptx: &str) -> Result<(), BackendError> {
    let found = ptx_entries(ptx);
    for entry in module.entries {
        let fail = |message: String| BackendError::Kernel {
            module: module.name.to_string(),
            entry: entry.name.to_string(),
            message,
        };
        let Some(compiled) = found.iter().find(|found| found.name == entry.name) else {
            return Err(fail(format!(
                "the PTX has no .entry of that name (it has {}); is it `extern \"C\" __global__`?",
                found
                    .iter()
                    .map(|found| found.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if compiled.params.len() != entry.params.len() {
            return Err(fail(format!(
                "the PTX entry takes {} parameters ({}), the description {}",
                compiled.params.len(),
                compiled.params.join(" "),
                entry.params.len()
            )));
        }
        for (index, (param, ptx_type)) in entry.params.iter().zip(&compiled.params).enumerate() {
            if !ptx_types(*param).contains(&ptx_type.as_str()) {
                return Err(fail(format!(
                    "parameter {index} is described as {} but compiled as {ptx_type}",
                    param.describe()
                )));
            }
        }
    }
    Ok(())
}
