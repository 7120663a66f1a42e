//! A sample item for tests and the fuzz targets: not an API.

/// An item every target takes (every field TOP and JD require), carrying seller's code
/// `code`: a 12.50 mug, 7 in stock, shipped from Hangzhou.
pub fn new_item(code: &str) -> super::NewItem {
    super::NewItem {
        seller_code: code.into(),
        category: "50003948".into(),
        title: "Mug".into(),
        description: "A mug, glazed.".into(),
        price: "12.50".into(),
        quantity: 7,
        props: Vec::new(),
        input_props: Vec::new(),
        skus: Vec::new(),
        shop: super::ShopListing {
            location_state: "浙江".into(),
            location_city: "杭州".into(),
            item_type: "fixed".into(),
            stuff_status: "new".into(),
        },
    }
}
