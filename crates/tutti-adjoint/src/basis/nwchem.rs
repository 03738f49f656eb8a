//! NWChem-format basis text: the shipped sets and users' files go through this parser.

use std::collections::BTreeMap;

use super::ShellData;
use crate::error::{AdjointError, Result};
use crate::molecule::charge_of;

/// One shell header's pending data: element, the l of each coefficient column, rows.
struct Block {
    charge: u32,
    column_ls: Vec<usize>,
    rows: Vec<Vec<f64>>,
    line: usize,
}

/// Parses NWChem basis text into shells per nuclear charge (file order; general contractions
/// and `SP` shells split into one shell per column).
pub(super) fn parse(text: &str, source: &str) -> Result<BTreeMap<u32, Vec<ShellData>>> {
    let error = |line: usize, message: String| AdjointError::BasisParse {
        source_name: source.to_string(),
        line,
        message,
    };
    let mut elements: BTreeMap<u32, Vec<ShellData>> = BTreeMap::new();
    let mut current: Option<Block> = None;
    let mut in_ecp = false;
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or("");
        let keyword = first.to_ascii_uppercase();
        if keyword == "BASIS" {
            flush(&mut current, &mut elements, &error)?;
            continue;
        }
        if keyword == "ECP" || keyword == "SO" {
            flush(&mut current, &mut elements, &error)?;
            in_ecp = true;
            continue;
        }
        if keyword == "END" {
            flush(&mut current, &mut elements, &error)?;
            in_ecp = false;
            continue;
        }
        if in_ecp {
            return Err(error(
                number,
                "effective core potentials (ECP blocks) are not supported".into(),
            ));
        }
        let starts_numeric = first
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.' || c == '-' || c == '+');
        if !starts_numeric {
            flush(&mut current, &mut elements, &error)?;
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 2 {
                return Err(error(
                    number,
                    format!("expected a shell header `Symbol L` (e.g. `O S`), found `{line}`"),
                ));
            }
            let charge = charge_of(fields[0])
                .map_err(|_| error(number, format!("unknown element `{}`", fields[0])))?;
            let column_ls = shell_letters(fields[1]).ok_or_else(|| {
                error(
                    number,
                    format!(
                        "unknown shell type `{}`; expected S, P, D, F, G (l <= 4) or SP",
                        fields[1]
                    ),
                )
            })?;
            current = Some(Block {
                charge,
                column_ls,
                rows: Vec::new(),
                line: number,
            });
            continue;
        }
        let Some(block) = current.as_mut() else {
            return Err(error(
                number,
                format!("numbers before any shell header: `{line}`"),
            ));
        };
        let row = line
            .split_whitespace()
            .map(|field| {
                field
                    .replace(['D', 'd'], "E")
                    .parse::<f64>()
                    .map_err(|_| error(number, format!("`{field}` is not a number")))
            })
            .collect::<Result<Vec<f64>>>()?;
        block.rows.push(row);
    }
    flush(&mut current, &mut elements, &error)?;
    if elements.is_empty() {
        return Err(error(0, "no shells found".into()));
    }
    Ok(elements)
}

fn shell_letters(text: &str) -> Option<Vec<usize>> {
    let upper = text.to_ascii_uppercase();
    if upper == "SP" || upper == "L" {
        return Some(vec![0, 1]);
    }
    let l = match upper.as_str() {
        "S" => 0,
        "P" => 1,
        "D" => 2,
        "F" => 3,
        "G" => 4,
        _ => return None,
    };
    Some(vec![l])
}

fn flush(
    current: &mut Option<Block>,
    elements: &mut BTreeMap<u32, Vec<ShellData>>,
    error: &impl Fn(usize, String) -> AdjointError,
) -> Result<()> {
    let Some(block) = current.take() else {
        return Ok(());
    };
    if block.rows.is_empty() {
        return Err(error(
            block.line,
            "shell header without any primitive rows".into(),
        ));
    }
    let columns = block.rows[0].len();
    if columns < 2 {
        return Err(error(
            block.line,
            "each row needs an exponent and at least one coefficient".into(),
        ));
    }
    if let Some(bad) = block.rows.iter().find(|row| row.len() != columns) {
        return Err(error(
            block.line,
            format!(
                "rows of one shell differ in length ({} and {} numbers)",
                columns,
                bad.len()
            ),
        ));
    }
    let coefficient_columns = columns - 1;
    // SP: the two columns are s and p; a general contraction: every column has the header's l.
    let ls: Vec<usize> = if block.column_ls.len() == 2 {
        if coefficient_columns != 2 {
            return Err(error(
                block.line,
                format!("an SP shell needs 2 coefficient columns, found {coefficient_columns}"),
            ));
        }
        block.column_ls.clone()
    } else {
        vec![block.column_ls[0]; coefficient_columns]
    };
    let exponents: Vec<f64> = block.rows.iter().map(|row| row[0]).collect();
    let shells = elements.entry(block.charge).or_default();
    for (column, l) in ls.into_iter().enumerate() {
        let shell = ShellData {
            l,
            exponents: exponents.clone(),
            coefficients: block.rows.iter().map(|row| row[column + 1]).collect(),
        };
        shell
            .validate()
            .map_err(|err| error(block.line, err.to_string()))?;
        shells.push(shell);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn general_contraction_and_sp_split_per_column() {
        let text = "BASIS \"ao basis\" SPHERICAL\n# comment\nLi SP\n 1.0 0.5 0.25\n 0.5 0.5 0.75\nH S\n 2.0 0.1 0.0\n 1.0 0.9 1.0D+00\nEND\n";
        let elements = parse(text, "inline").unwrap();
        let li = &elements[&3];
        assert_eq!(li.len(), 2);
        assert_eq!((li[0].l, li[1].l), (0, 1));
        assert_eq!(li[1].coefficients, vec![0.25, 0.75]);
        let h = &elements[&1];
        assert_eq!(h.len(), 2);
        assert_eq!(h[1].coefficients, vec![0.0, 1.0]);
        assert_eq!(h[1].exponents, vec![2.0, 1.0]);
    }

    #[test]
    fn bad_text_is_a_clear_error() {
        for (text, needle) in [
            ("Xx S\n 1.0 1.0\n", "unknown element"),
            ("H Q\n 1.0 1.0\n", "unknown shell type"),
            ("H H\n 1.0 1.0\n", "l <= 4"),
            ("H S\n", "without any primitive"),
            ("1.0 1.0\n", "before any shell header"),
            ("H S\n 1.0 x\n", "not a number"),
            ("H S\n 1.0 1.0\n 2.0\n", "differ in length"),
            ("H S\n -1.0 1.0\n", "exponent"),
            ("", "no shells"),
            ("ECP\nNa nelec 10\nEND\n", "ECP"),
        ] {
            let message = parse(text, "t").unwrap_err().to_string();
            assert!(
                message.contains(needle),
                "{message:?} should mention {needle:?}"
            );
        }
    }
}
