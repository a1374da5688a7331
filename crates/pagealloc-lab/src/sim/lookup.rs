//! A machine by name: the published machines of [`super::machine`], and `host`, the
//! machine this process runs on, read by [`super::host`].
//!
//! # Design
//! The lookup stands apart from both so that the machines' data does not import the
//! host's reader, which builds a [`Machine`] from that data.

use super::machine::{Machine, MachineError, MACHINES};

impl Machine {
    /// The machine called `name`.
    ///
    /// # Errors
    /// [`MachineError::Unknown`], listing the valid names; [`MachineError::Host`] for
    /// `host` on a machine whose sysfs or zoneinfo cannot be read.
    pub fn by_name(name: &str) -> Result<Machine, MachineError> {
        if name.trim() == "host" {
            return Machine::host();
        }
        MACHINES
            .iter()
            .find(|m| m.name == name.trim())
            .cloned()
            .ok_or_else(|| MachineError::Unknown(name.to_owned()))
    }

    /// This machine, read from sysfs and `/proc` once per process ([`super::host`]).
    ///
    /// # Errors
    /// [`MachineError::Host`], with the reason.
    pub fn host() -> Result<Machine, MachineError> {
        super::host::host()
    }

    /// The machine the seed measurements ran `workload` on (the simulator's default), as
    /// its registry entry says ([`crate::workload::Entry::seed_machine`]); an unknown
    /// workload gets the desktop.
    pub fn seed_for(workload: &str) -> Machine {
        let name = crate::workload::entry(workload).map_or("desktop-8", |e| e.seed_machine);
        Machine::by_name(name).expect("the seed machines are described")
    }
}
