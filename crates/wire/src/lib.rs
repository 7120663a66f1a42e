//! The wire layer of syncfleet: what a request to Taobao (TOP), JD (JOS) or 1688 is and what
//! comes back, below everything else (docs/design.md, "Layers"). The platform adapters
//! (signing, request building, typed parsing, error classes, the HTTP client), the platforms'
//! day and clock, the clock a process reads, secrets and their sealing at rest, and the problems found in a file a
//! person wrote. It knows nothing of jobs, queues, gates or the configuration file.

#![warn(missing_docs)]

pub mod clock;
pub mod file_problem;
pub mod platform;
pub mod seal;
pub mod secret;
pub mod time;
