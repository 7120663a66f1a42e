//! The platforms' APIs as their SDKs and documentation define them: one declarative row per
//! (platform, API) with its method, required parameters, limits and answer path. The adapters
//! build their requests from these rows, config validation reads their limits, and
//! `docs/wire-formats.md` cites the source of every fact.

use super::{Api, Platform};

/// One API of one platform, as its SDK's request class checks it and its response class reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiSpec {
    /// The method name (TOP, JOS) or `namespace/apiName` (1688).
    pub method: &'static str,
    /// Business parameters the request class's `check()` / `Validate()` requires.
    pub required: &'static [&'static str],
    /// The largest page a list API serves (`page_size` / `pageSize`).
    pub page_size_max: Option<u32>,
    /// The longest window a list API accepts between its start and end, in seconds.
    pub window_max_s: Option<u64>,
    /// Where the answer sits in a success body.
    pub answer: &'static str,
    /// Where the facts of this row come from (the full citation is in docs/wire-formats.md).
    pub source: &'static str,
}

const DAY_S: u64 = 86_400;

/// TOP's fields asked of `taobao.trades.sold.increment.get`: only the fields named come back,
/// and these are what the order sync reads (`Trade`: tid, status, modified, payment).
pub const TOP_TRADE_FIELDS: &str = "tid,status,modified,payment";

/// JD's `optional_fields` of `jingdong.pop.order.search` (required: "不填或者为空则请求被拒绝"):
/// the order's id, state, modification time, total, and the carrier's waybill number its
/// logistics trace is asked by.
pub const JD_ORDER_FIELDS: &str = "orderId,orderState,modified,orderTotalPrice,waybill";

/// JD's `order_state` of `jingdong.pop.order.search` (required): every state an order moves
/// through, so a window's modified orders are all listed whatever their state.
pub const JD_ORDER_STATES: &str = "WAIT_SELLER_STOCK_OUT,WAIT_GOODS_RECEIVE_CONFIRM,WAIT_SELLER_DELIVERY,PAUSE,FINISHED_L,TRADE_CANCELED,LOCKED,POP_ORDER_PAUSE";

/// 1688's `webSite` parameter for the 1688 site (as opposed to `alibaba`, the international one).
pub const ALIBABA_WEBSITE: &str = "1688";

const TOP_TRADES: ApiSpec = ApiSpec {
    method: "taobao.trades.sold.increment.get",
    required: &["fields", "start_modified", "end_modified"],
    page_size_max: Some(100),
    window_max_s: Some(DAY_S),
    answer: "trades_sold_increment_get_response.{total_results, trades.trade[]}",
    source:
        "TOP SDK TradesSoldIncrementGetRequest check(); API doc taobao.trades.sold.increment.get",
};

/// TOP's fields asked of `taobao.item.seller.get`: what a listing maps from (category,
/// attributes and SKUs as `props_name` / `properties_name` text, images, description).
pub const TOP_ITEM_FIELDS: &str =
    "num_iid,title,price,num,cid,props_name,desc,pic_url,item_imgs,skus";

/// TOP's fields asked of `taobao.items.custom.get`: the item and the code it carries.
pub const TOP_FOUND_FIELDS: &str = "num_iid,outer_id";

/// JD's `field` of `jingdong.ware.read.searchWare4Valid`: the ware and the code it carries.
pub const JD_FOUND_FIELDS: &str = "wareId,itemNum,outerId";

/// The longest title a target takes, counted as the platform counts. TOP: "不能超过30字符",
/// 30 Chinese characters, i.e. 60 where a Chinese character counts two (docs/wire-formats.md).
/// JD's SDK checks none and no source we hold names one: `None` (the map's `[title]
/// max_chars` sets one).
pub fn title_limit(platform: Platform) -> Option<TitleLimit> {
    match platform {
        Platform::Taobao => Some(TitleLimit {
            max: 60,
            wide_counts_two: true,
        }),
        Platform::Jd | Platform::Alibaba => None,
    }
}

/// A title length limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TitleLimit {
    /// The most units a title may have.
    pub max: usize,
    /// A character outside ASCII counts two units.
    pub wide_counts_two: bool,
}

impl TitleLimit {
    /// The units of `c`.
    pub fn units(&self, c: char) -> usize {
        if self.wide_counts_two && !c.is_ascii() {
            2
        } else {
            1
        }
    }

    /// The longest prefix of `title` within the limit; `None` when it fits whole.
    pub fn cut<'a>(&self, title: &'a str) -> Option<&'a str> {
        let mut used = 0;
        for (at, c) in title.char_indices() {
            used += self.units(c);
            if used > self.max {
                return Some(title[..at].trim_end());
            }
        }
        None
    }
}

/// The shortest and longest description TOP's `item.add` takes ("5-25000 字符").
pub const TOP_DESC_CHARS: std::ops::RangeInclusive<usize> = 5..=25_000;

/// How many of a seller's codes one `taobao.items.custom.get` takes ("最多不超过40个").
pub const TOP_FIND_CODES_MAX: usize = 40;

const TABLE: [(Platform, Api, ApiSpec); 16] = [
    (
        Platform::Taobao,
        Api::ItemGet,
        ApiSpec {
            method: "taobao.item.seller.get",
            required: &["fields", "num_iid"],
            page_size_max: None,
            window_max_s: None,
            answer: "item_seller_get_response.item",
            source: "TOP SDK ItemSellerGetRequest check()",
        },
    ),
    (
        Platform::Taobao,
        Api::ItemAdd,
        ApiSpec {
            method: "taobao.item.add",
            required: &[
                "num",
                "price",
                "type",
                "stuff_status",
                "title",
                "desc",
                "location.state",
                "location.city",
                "cid",
            ],
            page_size_max: None,
            window_max_s: None,
            answer: "item_add_response.item.{num_iid, created}",
            source: "TOP SDK ItemAddRequest check() (PHP, C#); TaobaoItemAddAPIResponse",
        },
    ),
    (
        Platform::Taobao,
        Api::ItemFind,
        ApiSpec {
            method: "taobao.items.custom.get",
            required: &["outer_id", "fields"],
            page_size_max: None,
            window_max_s: None,
            answer: "items_custom_get_response.items.item[].{num_iid, outer_id}",
            source: "TOP SDK ItemsCustomGetRequest Validate(); ItemsCustomGetResponse",
        },
    ),
    (Platform::Taobao, Api::OrderList, TOP_TRADES),
    (
        Platform::Taobao,
        Api::LogisticsTrace,
        ApiSpec {
            method: "taobao.logistics.trace.search",
            required: &["tid"],
            page_size_max: None,
            window_max_s: None,
            answer: "logistics_trace_search_response.{status, trace_list.transit_step_info[]}",
            source: "TOP SDK LogisticsTraceSearchRequest; TaobaoLogisticsTraceSearchAPIResponse",
        },
    ),
    (
        Platform::Taobao,
        Api::MessageConsume,
        ApiSpec {
            method: "taobao.tmc.messages.consume",
            required: &[],
            page_size_max: Some(200),
            window_max_s: None,
            answer: "tmc_messages_consume_response.messages.tmc_message[]",
            source: "TOP SDK TmcMessagesConsumeRequest (quantity 10..=200)",
        },
    ),
    (
        Platform::Taobao,
        Api::MessageConfirm,
        ApiSpec {
            method: "taobao.tmc.messages.confirm",
            required: &["s_message_ids"],
            page_size_max: None,
            window_max_s: None,
            answer: "tmc_messages_confirm_response.is_success",
            source: "TOP SDK TmcMessagesConfirmRequest",
        },
    ),
    (
        Platform::Jd,
        Api::ItemGet,
        ApiSpec {
            method: "jingdong.ware.read.findWareById",
            required: &["wareId"],
            page_size_max: None,
            window_max_s: None,
            answer: "jingdong_ware_read_findWareById_responce.ware",
            source: "JD SDK WareReadFindWareByIdRequest",
        },
    ),
    (
        Platform::Jd,
        Api::ItemAdd,
        ApiSpec {
            method: "jingdong.ware.write.add",
            required: &["ware", "skus"],
            page_size_max: None,
            window_max_s: None,
            answer: "jingdong_ware_write_add_responce.ware.{wareId, skus[]}",
            source: "JD SDK WareWriteAddRequest (ware, skus); JOS scenario doc 588",
        },
    ),
    (
        Platform::Jd,
        Api::ItemFind,
        ApiSpec {
            method: "jingdong.ware.read.searchWare4Valid",
            required: &["itemNum"],
            page_size_max: Some(20),
            window_max_s: None,
            answer: "jingdong_ware_read_searchWare4Valid_responce.page.data[].{wareId, itemNum}",
            source: "JD SDK WareReadSearchWare4ValidRequest (itemNum); XiBao/jos searchWare4Valid.go",
        },
    ),
    (
        Platform::Jd,
        Api::OrderList,
        ApiSpec {
            method: "jingdong.pop.order.search",
            required: &["order_state", "optional_fields", "start_date", "end_date"],
            // JD's own page says 100 in its SDK's doc text, 50 in its current copies: 50.
            page_size_max: Some(50),
            window_max_s: Some(30 * DAY_S),
            answer: "jingdong_pop_order_search_responce.searchorderinfo_result.{apiResult, orderTotal, orderInfoList[]}",
            source: "JD API doc jingdong.pop.order.search; JD SDK PopOrderSearchRequest",
        },
    ),
    (
        Platform::Jd,
        Api::LogisticsTrace,
        ApiSpec {
            method: "jingdong.etms.trace.get",
            required: &["waybillCode"],
            page_size_max: None,
            window_max_s: None,
            answer: "jingdong_etms_trace_get_responce.trace_api_dtos[]",
            source: "JD SDK EtmsTraceGetRequest / EtmsTraceGetResponse",
        },
    ),
    (
        Platform::Alibaba,
        Api::ItemGet,
        ApiSpec {
            // A distributor reads a supplier's product here (`alibaba.product.get` answers the
            // caller's own products only).
            method: "com.alibaba.fenxiao/alibaba.fenxiao.productInfo.get",
            required: &["offerId"],
            page_size_max: None,
            window_max_s: None,
            answer: "productInfo.{productID, categoryID, subject, description, productImage, productAttribute[], productSkuInfos[], productSaleInfo}",
            source: "1688 API doc alibaba.fenxiao.productInfo.get; AlibabaFenxiaoProductInfoGetParam; go1688 fenxiao/model/product.go",
        },
    ),
    (
        Platform::Alibaba,
        Api::OrderList,
        ApiSpec {
            method: "com.alibaba.trade/alibaba.trade.getSellerOrderList",
            required: &["modifyStartTime", "modifyEndTime", "page", "pageSize"],
            page_size_max: Some(20),
            window_max_s: None,
            answer: "{result[].{baseInfo, nativeLogistics.logisticsItems[]}, totalRecord}",
            source: "1688 API doc alibaba.trade.getSellerOrderList (pageSize 最高20)",
        },
    ),
    (
        Platform::Alibaba,
        Api::LogisticsTrace,
        ApiSpec {
            method: "com.alibaba.logistics/alibaba.trade.getLogisticsTraceInfo.sellerView",
            required: &["logisticsId", "orderId", "webSite"],
            page_size_max: None,
            window_max_s: None,
            answer: "logisticsTrace[].logisticsSteps[].{acceptTime, remark}",
            source: "1688 API doc alibaba.trade.getLogisticsTraceInfo.sellerView",
        },
    ),
    (
        Platform::Alibaba,
        Api::LogisticsInfo,
        ApiSpec {
            method: "com.alibaba.logistics/alibaba.trade.getLogisticsInfos.sellerView",
            required: &["orderId", "webSite"],
            page_size_max: None,
            window_max_s: None,
            answer: "result[].{logisticsId, logisticsBillNo, status}",
            source: "1688 API doc alibaba.trade.getLogisticsInfos.sellerView",
        },
    ),
];

/// The row of `api` on `platform`; None when the platform does not offer it.
pub fn spec(platform: Platform, api: Api) -> Option<&'static ApiSpec> {
    TABLE
        .iter()
        .find(|(p, a, _)| *p == platform && *a == api)
        .map(|(_, _, s)| s)
}

/// What a platform's logistics trace is asked by (docs/wire-formats.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceKey {
    /// The order id itself (TOP's `tid`).
    OrderId,
    /// The carrier's waybill number, which the order list gives (JD's `waybill`).
    Waybill,
    /// The parcel's id, which a logistics info call gives once (1688's `logisticsId`).
    ParcelId,
}

/// What `platform`'s trace is asked by.
pub fn trace_key(platform: Platform) -> TraceKey {
    match platform {
        Platform::Taobao => TraceKey::OrderId,
        Platform::Jd => TraceKey::Waybill,
        Platform::Alibaba => TraceKey::ParcelId,
    }
}

/// Whether `platform`'s order list comes newest first, as the walk asks it: TOP's answer is
/// "以订单的修改时间倒序排列"; JD's when `sortType=1` ("降序"), which the adapter sends; 1688's
/// order is not documented, and the walk is correct either way (jobs/orders.rs, `Walk`) as
/// long as it is told the truth: the simulator lists 1688's oldest first.
pub fn lists_newest_first(platform: Platform) -> bool {
    match platform {
        Platform::Taobao | Platform::Jd => true,
        Platform::Alibaba => false,
    }
}

/// The largest order page `platform` serves.
pub fn order_page_size_max(platform: Platform) -> u32 {
    spec(platform, Api::OrderList)
        .and_then(|s| s.page_size_max)
        .unwrap_or(20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_offered_api_has_one_row() {
        for p in Platform::ALL {
            for a in Api::ALL {
                let rows = TABLE
                    .iter()
                    .filter(|(tp, ta, _)| *tp == p && *ta == a)
                    .count();
                let offered = !matches!(
                    (p, a),
                    (
                        Platform::Jd | Platform::Alibaba,
                        Api::MessageConsume | Api::MessageConfirm
                    ) | (Platform::Taobao | Platform::Jd, Api::LogisticsInfo)
                        | (Platform::Alibaba, Api::ItemAdd | Api::ItemFind)
                );
                assert_eq!(rows, usize::from(offered), "{p} {a}");
            }
        }
    }

    #[test]
    fn titles_are_cut_as_the_platform_counts() {
        let top = title_limit(Platform::Taobao).unwrap();
        assert_eq!(top.cut(&"a".repeat(60)), None);
        assert_eq!(top.cut(&"a".repeat(61)).map(str::len), Some(60));
        // A Chinese character counts two on TOP: 30 fit, the 31st does not.
        let wide = "棉".repeat(31);
        assert_eq!(top.cut(&wide).map(|t| t.chars().count()), Some(30));
        assert_eq!(title_limit(Platform::Jd), None);
    }

    #[test]
    fn page_caps_are_the_platforms() {
        assert_eq!(order_page_size_max(Platform::Taobao), 100);
        assert_eq!(order_page_size_max(Platform::Jd), 50);
        assert_eq!(order_page_size_max(Platform::Alibaba), 20);
    }
}
