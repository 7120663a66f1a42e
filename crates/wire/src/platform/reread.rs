//! Reading again what the quarantine kept (docs/design.md, "Quarantine"): an order-list entry
//! or a change message, through the same per-entry readers the answers go through, so a
//! record that an adapter reads now (a fixed reader, a platform that fixed its data) can be
//! taken after all. The raw text is what the platform sent (capped at 4 KB: a longer record
//! cannot be read again), or, for an order whose amount was unreadable, the order as the
//! adapter read it.

use super::model::{Message, Order};
use super::{alibaba, jd, taobao, Platform};
use serde_json::Value;

/// The order in a quarantined order record, if it reads now.
pub fn reread_order(platform: Platform, raw: &str) -> Option<Order> {
    // An order the adapter read whose amount the ledger could not take.
    if let Ok(order) = serde_json::from_str::<Order>(raw) {
        return Some(order);
    }
    let entry: Value = serde_json::from_str(raw).ok()?;
    let read = match platform {
        Platform::Taobao => taobao::trade(&entry),
        Platform::Jd => jd::order_info(&entry),
        Platform::Alibaba => alibaba::base_info(&entry),
    };
    read.ok().flatten()
}

/// The change message in a quarantined message record, if it reads now (TOP's: the only
/// platform whose messages are pulled).
pub fn reread_message(platform: Platform, raw: &str) -> Option<Message> {
    let entry: Value = serde_json::from_str(raw).ok()?;
    match platform {
        Platform::Taobao => taobao::tmc_message(&entry),
        Platform::Jd | Platform::Alibaba => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_with_a_readable_time_reads_and_one_without_does_not() {
        let good = r#"{"tid":"77","status":"WAIT_SELLER_SEND_GOODS","modified":"2026-01-01 10:00:00","payment":"9.90"}"#;
        let order = reread_order(Platform::Taobao, good).expect("reads");
        assert_eq!(
            (order.order_id.as_str(), order.amount.as_str()),
            ("77", "9.90")
        );
        let bad = r#"{"tid":"77","modified":"0000-00-00 unreadable"}"#;
        assert_eq!(reread_order(Platform::Taobao, bad), None);
        let jd = r#"{"orderId":"5","orderState":"WAIT_SELLER_STOCK_OUT","modified":"2026-01-01 10:00:00","orderTotalPrice":"1.00"}"#;
        assert_eq!(
            reread_order(Platform::Jd, jd).map(|o| o.order_id),
            Some("5".into())
        );
        let al = r#"{"id":"9","status":"waitbuyerpay","modifyTime":"20260101100000000+0800","totalAmount":"2"}"#;
        assert_eq!(
            reread_order(Platform::Alibaba, al).map(|o| o.order_id),
            Some("9".into())
        );
        assert_eq!(reread_order(Platform::Taobao, "{not json"), None);
    }

    #[test]
    fn an_order_read_with_an_unreadable_amount_is_read_back_as_it_was() {
        let o = Order {
            order_id: "8".into(),
            status: "TRADE_FINISHED".into(),
            modified: chrono::DateTime::from_timestamp(1_767_225_600, 0).unwrap(),
            amount: "12.34".into(),
            tracking: None,
        };
        let raw = serde_json::to_string(&o).unwrap();
        assert_eq!(reread_order(Platform::Taobao, &raw), Some(o));
    }

    #[test]
    fn a_message_with_a_readable_time_reads() {
        let m = r#"{"id":7104300007405429232,"topic":"taobao_trade_TradeBuyerPay","pub_time":"2026-01-01 10:00:00","user_nick":"s2","content":"{\"tid\":\"77\",\"status\":\"WAIT_SELLER_SEND_GOODS\",\"payment\":\"1.00\"}"}"#;
        let read = reread_message(Platform::Taobao, m).expect("reads");
        assert_eq!(read.id, 7_104_300_007_405_429_232);
        let bad = m.replace("2026-01-01 10:00:00", "bad");
        assert_eq!(reread_message(Platform::Taobao, &bad), None);
        assert_eq!(reread_message(Platform::Jd, m), None);
    }
}
