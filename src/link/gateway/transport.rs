//! The seam in front of the HTTP client: a bulkhead sends through a [`Transport`], which is a
//! [`PlatformClient`] in production and a scripted fake in the gateway's unit tests.
//!
//! The impl for `PlatformClient` lives here rather than in `platform::client`, so the platform
//! layer does not depend on the link layer (the dependency runs one way: link → platform).

use crate::platform::{ApiRequest, ApiResponse, CallError, PlatformClient};
use crate::secret::Secret;
use futures::future::BoxFuture;
use std::time::Duration;

/// Sends one request to one platform and classifies the answer.
pub(crate) trait Transport: Send + Sync {
    /// One call of `req`; `slice` bounds the whole call (what the task budget grants).
    /// `session` is the calling shop's session when it is not the transport's own.
    fn call<'a>(
        &'a self,
        req: &'a ApiRequest,
        slice: Duration,
        session: Option<&'a Secret>,
    ) -> BoxFuture<'a, Result<ApiResponse, CallError>>;
}

impl Transport for PlatformClient {
    fn call<'a>(
        &'a self,
        req: &'a ApiRequest,
        slice: Duration,
        session: Option<&'a Secret>,
    ) -> BoxFuture<'a, Result<ApiResponse, CallError>> {
        Box::pin(async move {
            match session {
                Some(s) => self.with_session(s.clone()).call(req, slice).await,
                None => PlatformClient::call(self, req, slice).await,
            }
        })
    }
}
