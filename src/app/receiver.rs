//! The HTTP receiver of 1688's pushed change messages (`work --receive ADDR`): each POST is
//! checked against the app secret, brought into the ledger like a pulled message, and
//! answered 200 only after it is recorded, so 1688 sends again what was not (docs/design.md,
//! "Continuous sync").

use crate::jobs::listen::{take_messages, ListenTarget};
use crate::platform::alibaba::{parse_push, PushError};
use crate::secret::Secret;
use crate::shutdown::Shutdown;
use crate::store::Store;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use std::sync::Arc;
use tokio::net::TcpListener;

struct Receiver {
    store: Store,
    secret: Secret,
    target: ListenTarget,
}

async fn take(
    State(r): State<Arc<Receiver>>,
    Form(form): Form<Vec<(String, String)>>,
) -> (StatusCode, &'static str) {
    let message = match parse_push(r.secret.expose(), &form) {
        Ok(m) => m,
        Err(PushError::Signature) => return (StatusCode::UNAUTHORIZED, "bad signature"),
        Err(e) => {
            tracing::warn!("a pushed message refused: {e}");
            return (StatusCode::BAD_REQUEST, "not a message");
        }
    };
    match take_messages(&r.store, &r.target, std::slice::from_ref(&message)).await {
        Ok(_) => (StatusCode::OK, "success"),
        Err(e) => {
            tracing::warn!(
                message = message.id,
                "a pushed message not recorded (1688 sends it again): {e}"
            );
            (StatusCode::SERVICE_UNAVAILABLE, "not recorded")
        }
    }
}

/// Serve pushes on `listener` until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    store: Store,
    secret: Secret,
    target: ListenTarget,
    shutdown: Shutdown,
) {
    let state = Arc::new(Receiver {
        store,
        secret,
        target,
    });
    let app = axum::Router::new()
        .fallback(axum::routing::post(take))
        .with_state(state);
    let stop = async move { shutdown.wait().await };
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await
    {
        tracing::warn!("the push receiver stopped: {e}");
    }
}
