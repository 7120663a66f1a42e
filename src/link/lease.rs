//! Leases that elect one worker of a fleet for a periodic duty (the heal sweep, the probes):
//! kept in Redis by a fleet ([`FleetLink`]); a process that runs alone always holds them.
//! Which one a process gets is decided with its topology (docs/design.md, "Topology").

use super::shared::FleetLink;
use futures::future::{BoxFuture, FutureExt};
use std::time::Duration;

/// Why a lease could not be read: the duty is skipped for the round.
#[derive(Debug, thiserror::Error)]
#[error("lease unavailable: {0}")]
pub struct LeaseError(#[from] redis::RedisError);

/// Who does a periodic duty this round.
pub trait Leases: Send + Sync {
    /// Take or renew lease `name` for `ttl`; true when `holder` holds it afterwards.
    fn hold<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, LeaseError>>;
    /// Give lease `name` up if `holder` has it.
    fn release<'a>(&'a self, name: &'a str, holder: &'a str) -> BoxFuture<'a, ()>;
}

/// The leases of a process that runs alone: it holds every one.
#[derive(Debug, Clone, Copy, Default)]
pub struct AloneLeases;

impl Leases for AloneLeases {
    fn hold<'a>(
        &'a self,
        _name: &'a str,
        _holder: &'a str,
        _ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, LeaseError>> {
        async { Ok(true) }.boxed()
    }
    fn release<'a>(&'a self, _name: &'a str, _holder: &'a str) -> BoxFuture<'a, ()> {
        async {}.boxed()
    }
}

impl Leases for FleetLink {
    fn hold<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, LeaseError>> {
        async move { Ok(self.lease(name, holder, ttl).await?) }.boxed()
    }
    fn release<'a>(&'a self, name: &'a str, holder: &'a str) -> BoxFuture<'a, ()> {
        async move {
            // A lease not given back expires with its ttl; nothing to do on failure.
            let _ = FleetLink::release(self, name, holder).await;
        }
        .boxed()
    }
}
