//! The parcel ids the simulator gives a shipped order, as the order list announces them and
//! the logistics trace is asked by: JD's carrier waybill number, 1688's `logisticsId`
//! (docs/wire-formats.md). TOP's trace takes the order id itself.

/// JD: the carrier's waybill number of an order's parcel.
pub fn jd_waybill(order_id: u64) -> String {
    format!("JDVA{order_id:011}")
}

/// The order a JD waybill number belongs to.
pub fn order_of_jd_waybill(waybill: &str) -> Option<u64> {
    waybill.strip_prefix("JDVA")?.parse().ok()
}

/// 1688: the `logisticsId` (`logisticsCode` in the order list) of an order's parcel.
pub fn alibaba_logistics_id(order_id: u64) -> String {
    format!("BX{order_id}")
}

/// The order a 1688 `logisticsId` belongs to.
pub fn order_of_alibaba_logistics_id(id: &str) -> Option<u64> {
    id.strip_prefix("BX")?.parse().ok()
}

/// TOP: whether the order was shipped offline (`taobao.logistics.offline.send`), whose trace
/// reads "对方已签收" from the moment it ships: one order in ten.
pub fn top_offline_shipped(order_id: u64) -> bool {
    order_id % 10 == 7
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parcel_ids_round_trip() {
        assert_eq!(order_of_jd_waybill(&jd_waybill(1001)), Some(1001));
        assert_eq!(
            order_of_alibaba_logistics_id(&alibaba_logistics_id(7)),
            Some(7)
        );
        assert_eq!(order_of_jd_waybill("1001"), None);
        assert_eq!(order_of_alibaba_logistics_id(""), None);
    }
}
