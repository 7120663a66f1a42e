//! Whether a logistics trace step says the parcel was delivered. TOP's steps carry an
//! `action`, JD's a title, 1688's only the carrier's free-text remark; none documents the full
//! list of its values, so the texts are read by the words a signing uses (docs/design.md,
//! "Logistics").

/// Words of a step that is not a delivery although it mentions signing.
const NOT_DELIVERED: [&str; 6] = ["拒", "未签收", "待签收", "退回", "派送中", "异常"];

/// A carrier's text says the parcel was signed for (签收, 妥投) and not refused or pending.
pub fn text_says_signed(text: &str) -> bool {
    (text.contains("签收") || text.contains("妥投"))
        && !NOT_DELIVERED.iter().any(|w| text.contains(w))
}

/// TOP: the step's `action` is a signing, or its description says so.
pub fn top_step_signed(action: &str, description: &str) -> bool {
    matches!(action, "SIGNED" | "TMS_SIGN" | "STA_SIGN") || text_says_signed(description)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signing_words_and_their_negations() {
        for yes in ["已签收", "快件已被 已签收 签收", "妥投", "本人签收"] {
            assert!(text_says_signed(yes), "{yes}");
        }
        for no in [
            "快件已揽收",
            "运输中,已到达转运中心",
            "客户拒收",
            "拒签",
            "待签收",
            "派送中,请保持电话畅通签收",
            "签收异常",
            "",
        ] {
            assert!(!text_says_signed(no), "{no}");
        }
        assert!(top_step_signed("SIGNED", ""));
        assert!(top_step_signed("", "已签收"));
        assert!(!top_step_signed("TRANSPORT", "运输中"));
    }
}
