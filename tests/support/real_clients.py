"""Drive the platform simulator with the platforms' own Python SDKs.

TOP's `topsdk` (top/api/base.py) and JD's `jd-sdk` (jd/api/base.py), as published on PyPI,
sign and send the calls; nothing here builds a request by hand. Neither SDK ships request
classes for the APIs syncfleet uses, so `request()` makes a generic one: a RestApi subclass
whose `getapiname()` names the method and whose attributes are the business params (both
SDKs' `getApplicationParameters()` read the instance's attributes).

Environment: SIM_HOST, SIM_PORT; TOP_APP_KEY, TOP_SECRET, TOP_SESSION; JD_APP_KEY,
JD_SECRET, JD_SESSION. The SDKs are found on PYTHONPATH.

Prints one JSON object per call on stdout: {"platform", "method", "response"} or
{"platform", "method", "error"}. Run by tests/suite/real_clients.rs.
"""

import json
import os
import sys

import jd
import jd.api.base
import top
import top.api.base

# One day of the simulator's demo shop, in GMT+8 (both platforms' wire time zone).
WINDOW_START = "2026-01-01 00:00:00"
WINDOW_END = "2026-01-02 00:00:00"


def request(base, method, params):
    """A request of `base` (an SDK's RestApi) for `method` carrying `params`."""
    cls = type("GenericRequest", (base,), {"getapiname": lambda self: method})
    # getApplicationParameters() drops the RestApi's own attributes (`_RestApi__*`).
    req = cls(os.environ["SIM_HOST"], int(os.environ["SIM_PORT"]))
    for key, value in params.items():
        setattr(req, key, value)
    return req


def emit(platform, method, outcome, value):
    print(json.dumps({"platform": platform, "method": method, outcome: value},
                     ensure_ascii=False), flush=True)


def top_call(method, params, secret=None):
    req = request(top.api.base.RestApi, method, params)
    req.set_app_info(top.appinfo(os.environ["TOP_APP_KEY"],
                                 secret or os.environ["TOP_SECRET"]))
    try:
        resp = req.getResponse(os.environ["TOP_SESSION"])
    except top.api.base.TopException as e:
        err = {"code": e.errorcode, "msg": e.message, "sub_code": e.subcode,
               "sub_msg": e.submsg}
        emit("taobao", method, "error", err)
        return None
    except Exception as e:  # the SDK's own failures (HTTP status, JSON), reported as such
        emit("taobao", method, "error", {"exception": repr(e)})
        return None
    emit("taobao", method, "response", resp)
    return resp


def jd_call(method, params, secret=None):
    req = request(jd.api.base.RestApi, method, params)
    req.set_app_info(jd.appinfo(os.environ["JD_APP_KEY"],
                                secret or os.environ["JD_SECRET"]))
    try:
        resp = req.getResponse(access_token=os.environ["JD_SESSION"])
    except Exception as e:  # the SDK raises nothing of its own: transport or JSON failures
        emit("jd", method, "error", {"exception": repr(e)})
        return None
    # JD's SDK hands back the body as it is; an error is the `error_response` object.
    if isinstance(resp, dict) and "error_response" in resp:
        emit("jd", method, "error", resp["error_response"])
        return None
    emit("jd", method, "response", resp)
    return resp


def no_candidate(platform, method, why):
    emit(platform, method, "error", {"script": why})


def taobao():
    orders = "taobao.trades.sold.increment.get"
    window = {
        "start_modified": WINDOW_START,
        "end_modified": WINDOW_END,
        "page_no": 1,
        "page_size": 100,
    }
    page = top_call(orders, dict(window, fields="tid,status,modified,payment"))
    trades = []
    if page:
        body = page.get("trades_sold_increment_get_response", {})
        trades = body.get("trades", {}).get("trade", [])
    shipped = [t for t in trades if t.get("status") == "WAIT_BUYER_CONFIRM_GOODS"]
    trace = "taobao.logistics.trace.search"
    if shipped:
        top_call(trace, {"tid": shipped[0]["tid"]})
    else:
        no_candidate("taobao", trace, "no trade in WAIT_BUYER_CONFIRM_GOODS on page 1")
    # `fields` is required: TOP answers code 40 (missing required arguments).
    top_call(orders, window)


def jingdong():
    orders = "jingdong.pop.order.search"
    search = {
        "start_date": WINDOW_START,
        "end_date": WINDOW_END,
        "order_state": "WAIT_SELLER_STOCK_OUT,WAIT_GOODS_RECEIVE_CONFIRM,FINISHED_L,TRADE_CANCELED",
        "optional_fields": "orderId,orderState,modified,orderTotalPrice,waybill",
        "page": "1",
        "page_size": "50",
        "dateType": "0",
        "sortType": "1",
    }
    page = jd_call(orders, search)
    listed = []
    if page:
        body = page.get("jingdong_pop_order_search_responce", {})
        listed = body.get("searchorderinfo_result", {}).get("orderInfoList", [])
    moving = [o for o in listed
              if o.get("orderState") == "WAIT_GOODS_RECEIVE_CONFIRM" and o.get("waybill")]
    trace = "jingdong.etms.trace.get"
    if moving:
        jd_call(trace, {"waybillCode": moving[0]["waybill"]})
    else:
        no_candidate("jd", trace, "no order in WAIT_GOODS_RECEIVE_CONFIRM with a waybill on page 1")
    # Signed with a secret that is not the app's: JD answers code "12" (invalid signature).
    jd_call(orders, search, secret="not-the-secret")


def main():
    taobao()
    jingdong()
    return 0


if __name__ == "__main__":
    sys.exit(main())
