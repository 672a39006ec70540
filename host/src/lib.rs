//! This machine as labpool uses it: its clock, its users and groups, its GPUs, cores and
//! memory, the files labpool writes whole or opens from members, the environment variables it
//! reads and sets (and the whole environment a job starts with), and the one backoff of every retry. The controller, the agent and the commands
//! share these; none of them owns them.

pub mod atomic_file;
pub mod clock;
pub mod discovery;
pub mod env_vars;
pub mod identity;
pub mod job_environment;
pub mod member_file;
pub mod retry;
