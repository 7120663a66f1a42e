//! 1688-style pushed messages: the simulator POSTs each change of its 1688 apps' live orders
//! to `[orders.live] push_url`, as a form with `message` (the JSON message) and
//! `_aop_signature` (HMAC-SHA1 of `message` + its value under the app secret, 1688's way of
//! signing); a push not answered 2xx is sent again after `redeliver_after_s`, and the
//! message drills (loss, duplicates, delay) apply as to the pulled messages
//! (docs/design.md, "Continuous sync").

use super::live::Delivery;
use super::state::Sim;
use crate::platform::{sign, Platform};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// 1688's topic of the change a delivery carries.
fn topic(d: &Delivery) -> &'static str {
    use super::data::OrderState;
    match d.order.state {
        OrderState::Created => "ORDER_BUYER_VIEW_BUYER_MAKE",
        OrderState::Unshipped => "ORDER_BUYER_VIEW_ORDER_PAY",
        OrderState::Shipped => "ORDER_BUYER_VIEW_ANNOUNCE_SENDGOODS",
        OrderState::Signed => "ORDER_BUYER_VIEW_ORDER_SUCCESS",
        OrderState::Closed => "ORDER_BUYER_VIEW_ORDER_BUYER_CLOSE",
        OrderState::Refunded => "ORDER_BUYER_VIEW_ORDER_REFUND_AFTERSALES",
    }
}

/// The form of one push: the message and its signature.
pub fn push_form(secret: &str, d: &Delivery) -> Vec<(String, String)> {
    let p = Platform::Alibaba;
    let message = serde_json::json!({
        "msgId": d.id,
        "type": topic(d),
        "gmtBorn": d.order.modified * 1000,
        "userInfo": d.shop,
        "data": {
            "orderId": d.order.id,
            "currentStatus": super::proto::order_status(p, d.order.state),
            "totalAmount": super::data::format_price(d.order.amount_cents),
        },
    })
    .to_string();
    let signature = sign::alibaba_sign(secret, "", [("message", message.as_str())]);
    vec![
        ("message".into(), message),
        ("_aop_signature".into(), signature),
    ]
}

/// Push until `stop`: every 200 ms, what is due of each 1688 app, one POST per message.
pub async fn run(sim: Arc<Sim>, url: String, mut stop: watch::Receiver<bool>) {
    let http = reqwest::Client::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
        for (i, app) in sim.apps.iter().enumerate() {
            if app.cfg.platform != Platform::Alibaba {
                continue;
            }
            let shops = sim.live_shops(i);
            let now = sim.now().timestamp_millis();
            let due = app
                .messages
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .consume(&shops, now, 200);
            let mut taken = Vec::new();
            for d in &due {
                let form = push_form(app.cfg.secret.expose(), d);
                let ok = http
                    .post(&url)
                    .timeout(Duration::from_secs(5))
                    .form(&form)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                if ok {
                    taken.push(d.id);
                }
            }
            app.messages
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .confirm(&taken);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{OrderData, OrderState};
    use crate::platform::alibaba::{parse_push, PushError};

    #[test]
    fn a_push_reads_back_and_a_wrong_key_or_a_changed_message_is_refused() {
        let d = Delivery {
            id: 77,
            shop: "s1".into(),
            order: OrderData {
                id: 2_000_000_005,
                modified: 1_780_000_000,
                state: OrderState::Shipped,
                amount_cents: 1234,
            },
        };
        let form = push_form("secret", &d);
        let m = parse_push("secret", &form).expect("a message");
        assert_eq!((m.id, m.seller.as_str()), (77, "s1"));
        assert_eq!(m.topic, "ORDER_BUYER_VIEW_ANNOUNCE_SENDGOODS");
        let o = m.order.expect("the order");
        assert_eq!(
            (o.order_id.as_str(), o.status.as_str(), o.amount.as_str()),
            ("2000000005", "waitbuyerreceive", "12.34")
        );
        // `gmtBorn` is the message's time, not the order's own.
        assert_eq!(m.born.timestamp(), 1_780_000_000);
        assert_eq!(o.modified, None);
        assert_eq!(parse_push("other", &form), Err(PushError::Signature));
        let mut changed = form.clone();
        changed[0].1 = changed[0].1.replace("waitbuyerreceive", "success");
        assert_eq!(parse_push("secret", &changed), Err(PushError::Signature));
        assert_eq!(parse_push("secret", &form[..1]), Err(PushError::Missing));
    }
}
