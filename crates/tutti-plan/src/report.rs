//! A plan printed as a table for people.

use std::fmt;

use tutti_backend::format_bytes;

use crate::{Plan, Tier};

impl Plan {
    /// The plan in one line: what the objects use of each tier's budget, device figures per
    /// device.
    ///
    /// ```
    /// use tutti_plan::{Budget, ObjectSpec, Planner};
    ///
    /// let budget = Budget::new(2, 1 << 20, 1 << 30, 0)?;
    /// let plan = Planner::new(budget).plan(&[ObjectSpec::per_device("a", 1024, 512)])?;
    /// assert_eq!(
    ///     plan.summary(),
    ///     "2 device(s): device 512.0 KiB of 1.0 MiB per device, host 0 B of 1.0 GiB, \
    ///      disk 0 B of 0 B"
    /// );
    /// # Ok::<(), tutti_plan::PlanError>(())
    /// ```
    pub fn summary(&self) -> String {
        let budget = self.budget();
        let tier = |tier: Tier| {
            format!(
                "{tier} {} of {}",
                format_bytes(self.used(tier)),
                format_bytes(budget.capacity(tier))
            )
        };
        format!(
            "{} device(s): {} per device, {}, {}",
            budget.devices(),
            tier(Tier::Device),
            tier(Tier::Host),
            tier(Tier::Disk)
        )
    }
}

impl fmt::Display for Plan {
    /// One row per object (name, bytes each, count, scope, tier, bytes on its tier), then
    /// one row per tier (budget, headroom, used, free). Device figures are per device.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let budget = self.budget();
        writeln!(
            f,
            "plan for {} device(s); device figures are per device",
            budget.devices()
        )?;
        let mut objects = vec![row(["object", "each", "count", "scope", "tier", "bytes"])];
        for placement in self.placements() {
            let object = &placement.object;
            objects.push(vec![
                object.name().to_string(),
                format_bytes(object.bytes_each()),
                object.count().to_string(),
                object.scope().to_string(),
                placement.tier.to_string(),
                format_bytes(placement.bytes),
            ]);
        }
        write_table(f, &objects, &[false, true, true, false, false, true])?;
        writeln!(f)?;

        let mut tiers = vec![row(["tier", "budget", "headroom", "used", "free"])];
        for tier in Tier::ALL {
            tiers.push(vec![
                tier.to_string(),
                format_bytes(budget.capacity(tier)),
                format_bytes(self.headroom().get(tier)),
                format_bytes(self.used(tier)),
                format_bytes(self.free(tier)),
            ]);
        }
        write_table(f, &tiers, &[false, true, true, true, true])?;
        if budget.device_memory_is_host() {
            writeln!(
                f,
                "device memory is host memory: host figures include the device tier's \
                 objects and headroom on every device"
            )?;
        }
        Ok(())
    }
}

fn row<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.iter().map(|cell| cell.to_string()).collect()
}

/// Writes `rows` (the first is the header) in aligned columns, two spaces apart;
/// `right[c]` right-aligns column `c`.
fn write_table(f: &mut fmt::Formatter<'_>, rows: &[Vec<String>], right: &[bool]) -> fmt::Result {
    let columns = right.len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|row| row.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let width = widths.get(c).copied().unwrap_or(0);
            if right.get(c).copied().unwrap_or(false) {
                line.push_str(&format!("{cell:>width$}"));
            } else {
                line.push_str(&format!("{cell:<width$}"));
            }
        }
        writeln!(f, "{}", line.trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{Budget, Headroom, ObjectSpec, Planner};

    #[test]
    fn plan_prints_as_a_table() {
        let budget = Budget::new(2, 100, 1000, 4096).expect("budget");
        let plan = Planner::new(budget)
            .with_headroom(Headroom {
                host: 10,
                ..Headroom::default()
            })
            .plan(&[
                ObjectSpec::per_device("mps_cores", 6, 10),
                ObjectSpec::per_device("environment", 50, 1),
                ObjectSpec::shared("mpo", 1024, 2),
            ])
            .expect("feasible");
        let expected = "\
plan for 2 device(s); device figures are per device
object          each  count  scope       tier      bytes
mps_cores        6 B     10  per device  device     60 B
environment     50 B      1  per device  host      100 B
mpo          1.0 KiB      2  shared      disk    2.0 KiB

tier     budget  headroom     used     free
device    100 B       0 B     60 B     40 B
host     1000 B      10 B    100 B    890 B
disk    4.0 KiB       0 B  2.0 KiB  2.0 KiB
";
        assert_eq!(plan.to_string(), expected, "\n{plan}");
    }

    #[test]
    fn simulated_devices_are_noted() {
        let budget = Budget::new(1, 10, 10, 10)
            .expect("budget")
            .with_device_memory_is_host(true);
        let plan = Planner::new(budget).plan(&[]).expect("empty plan");
        assert!(
            plan.to_string().ends_with("headroom on every device\n"),
            "{plan}"
        );
    }
}
