//! Today's burn curve of one gate as an SVG, over the recent hours: calls counted so far
//! against the share of the daily quota the elapsed part of the day allows (above the pace
//! line, the quota will not last).
//! Rendered server-side with plotters: no JavaScript chart library, nothing from a CDN.

use super::DashboardError;
use chrono::{DateTime, Duration as ChronoDuration, Timelike, Utc};
use plotters::prelude::*;

fn chart_err(e: impl std::fmt::Display) -> DashboardError {
    DashboardError::Chart(e.to_string())
}

/// One point per minute with calls: (minutes since the day's start, cumulative calls).
pub(crate) fn cumulative(
    day_start: DateTime<Utc>,
    per_minute: &[(String, u64)],
) -> Vec<(f64, f64)> {
    let mut total = 0u64;
    per_minute
        .iter()
        .filter_map(|(minute, calls)| {
            let at = chrono::NaiveDateTime::parse_from_str(minute, "%Y-%m-%d %H:%M").ok()?;
            let at = at.and_utc();
            total += calls;
            Some(((at - day_start).num_minutes() as f64, total as f64))
        })
        .collect()
}

/// End the curve at `now` with `live` calls when the ledger's points fall short of it (the
/// calls ledger is written in batches; the gate's counter is live).
pub(crate) fn end_at(
    used: &mut Vec<(f64, f64)>,
    day_start: DateTime<Utc>,
    now: DateTime<Utc>,
    live: u64,
) {
    let last = used.last().map_or(0.0, |p| p.1);
    if (live as f64) > last {
        let minute = (now - day_start).num_minutes() as f64;
        used.push((minute, live as f64));
    }
}

/// How much of the day the chart shows: the recent hours, where the work is. A whole day on
/// 480 pixels draws an hour of work as a vertical line at the right edge.
pub(crate) const WINDOW_MIN: f64 = 180.0;

/// The burn curve of `title`: `used` (cumulative calls per minute of the day) over the last
/// [`WINDOW_MIN`] minutes to `now`, against the day's pace line (the daily quota spread evenly
/// over the day: above it, the quota will not last) when `quota` is known. The x axis is the
/// platform's clock (GMT+8), the y axis the day's running count, so the curve and the pace
/// line compare directly.
pub(crate) fn burn_svg(
    title: &str,
    day_start: DateTime<Utc>,
    now: DateTime<Utc>,
    used: &[(f64, f64)],
    quota: Option<u64>,
) -> Result<String, DashboardError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (480, 220)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let elapsed = (now - day_start).num_minutes().clamp(1, 1440) as f64;
        let from = window_start(used, elapsed);
        let line = curve(used);
        let at = |minute: f64| {
            line.iter()
                .take_while(|p| p.0 <= minute)
                .last()
                .map_or(0.0, |p| p.1)
        };
        let pace = |minute: f64| quota.map(|q| q as f64 * minute / 1440.0);
        let top = at(elapsed).max(pace(elapsed).unwrap_or(0.0));
        let bottom = at(from).min(pace(from).unwrap_or(f64::MAX));
        let span = (top - bottom).max(10.0);
        let (y_lo, y_hi) = ((bottom - span * 0.05).max(0.0), top + span * 0.15);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(34)
            .y_label_area_size(56)
            // x in half hours, so the axis's round steps fall on the clock's half hours.
            .build_cartesian_2d(from / 30.0..elapsed.max(from + 1.0) / 30.0, y_lo..y_hi)
            .map_err(chart_err)?;
        chart
            .configure_mesh()
            .x_desc("GMT+8")
            .axis_desc_style(("sans-serif", 11))
            .x_labels(7)
            .x_label_formatter(&|h| {
                let m = (h * 30.0).round() as i64;
                format!("{:02}:{:02}", (m / 60) % 24, m % 60)
            })
            .y_labels(5)
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(chart_err)?;
        if quota.is_some() {
            let pace_line: Vec<(f64, f64)> = [from, elapsed]
                .iter()
                .filter_map(|m| Some((*m, pace(*m)?)))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    pace_line.into_iter().map(|(m, v)| (m / 30.0, v)),
                    &RGBColor(150, 150, 150),
                ))
                .map_err(chart_err)?
                .label("the day's pace");
        }
        let shown: Vec<(f64, f64)> = std::iter::once((from, at(from)))
            .chain(line.iter().copied().filter(|p| p.0 > from))
            .chain(std::iter::once((elapsed, at(elapsed))))
            .collect();
        chart
            .draw_series(LineSeries::new(
                shown.into_iter().map(|(m, v)| (m / 30.0, v)),
                RGBColor(200, 60, 40).stroke_width(2),
            ))
            .map_err(chart_err)?
            .label("calls today");
        root.present().map_err(chart_err)?;
    }
    Ok(svg)
}

/// Where the chart starts (minute of the day): the last [`WINDOW_MIN`] minutes, closer in
/// when the calls in them began later (a few minutes before the first, at least
/// [`WINDOW_MIN_SPAN`] minutes shown), so that a short burst of work has width.
fn window_start(used: &[(f64, f64)], elapsed: f64) -> f64 {
    let earliest = (elapsed - WINDOW_MIN).max(0.0);
    let first_call = used
        .iter()
        .find(|p| p.0 >= earliest)
        .map_or(elapsed, |p| p.0);
    let lead = ((elapsed - first_call) * 0.1).max(5.0);
    (first_call - lead)
        .min(elapsed - WINDOW_MIN_SPAN)
        .max(earliest)
}

/// The narrowest window the chart shows (minutes).
const WINDOW_MIN_SPAN: f64 = 15.0;

/// The drawn line of `used`: from the day's start, flat through minutes without calls (a
/// straight line from one point to the next would show calls in the idle hours between).
fn curve(used: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut line = vec![(0.0, 0.0)];
    for &(minute, total) in used {
        let (last_minute, last_total) = line[line.len() - 1];
        if minute - last_minute > 1.0 {
            line.push((minute - 1.0, last_total));
        }
        line.push((minute, total));
    }
    line
}

/// 00:00 GMT+8 of the platform day that contains `now`, in UTC.
pub(crate) fn day_start(now: DateTime<Utc>) -> DateTime<Utc> {
    let local = now + ChronoDuration::hours(8);
    let midnight = local
        - ChronoDuration::seconds(i64::from(local.num_seconds_from_midnight()))
        - ChronoDuration::nanoseconds(i64::from(local.nanosecond()));
    midnight - ChronoDuration::hours(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_stays_flat_through_idle_minutes() {
        let line = curve(&[(600.0, 40.0), (601.0, 90.0), (700.0, 120.0)]);
        assert_eq!(
            line,
            vec![
                (0.0, 0.0),
                (599.0, 0.0),
                (600.0, 40.0),
                (601.0, 90.0),
                (699.0, 90.0),
                (700.0, 120.0)
            ]
        );
        assert_eq!(curve(&[]), vec![(0.0, 0.0)]);
    }

    #[test]
    fn the_curve_ends_at_the_live_count() {
        let now = "2026-12-01T05:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let start = day_start(now);
        let mut used = vec![(700.0, 314.0)];
        end_at(&mut used, start, now, 545);
        assert_eq!(used.last(), Some(&(780.0, 545.0)));
        end_at(&mut used, start, now, 500);
        assert_eq!(used.len(), 2, "a lower live count changes nothing");
        let mut empty = Vec::new();
        end_at(&mut empty, start, now, 12);
        assert_eq!(empty, vec![(780.0, 12.0)]);
    }

    #[test]
    fn cumulative_counts_add_up_from_the_day_start() {
        let now = "2026-12-01T05:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let start = day_start(now);
        assert_eq!(
            start,
            "2026-11-30T16:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        let pts = cumulative(
            start,
            &[
                ("2026-11-30 16:10".into(), 5),
                ("2026-11-30 16:11".into(), 7),
            ],
        );
        assert_eq!(pts, vec![(10.0, 5.0), (11.0, 12.0)]);
    }

    #[test]
    fn the_chart_is_an_svg_with_the_curve() {
        let now = "2026-12-01T05:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let svg = burn_svg(
            "taobao.item_add",
            day_start(now),
            now,
            &[(10.0, 5.0), (11.0, 12.0)],
            Some(100_000),
        )
        .unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("<polyline"), "{svg}");
        assert!(svg.contains("taobao.item_add"));
    }

    #[test]
    fn the_window_closes_in_on_recent_work() {
        // Calls from 12:30 to 13:00: shown from 12:25, not from 10:00.
        assert_eq!(window_start(&[(750.0, 10.0), (779.0, 90.0)], 780.0), 745.0);
        // A burst in the last minute: the narrowest window.
        assert_eq!(window_start(&[(779.0, 10.0)], 780.0), 765.0);
        // Work all afternoon: the last three hours.
        let afternoon = [(590.0, 1.0), (600.0, 2.0), (700.0, 50.0), (779.0, 90.0)];
        assert_eq!(window_start(&afternoon, 780.0), 600.0);
        // Nothing yet: the narrowest window; early in the day, from 00:00.
        assert_eq!(window_start(&[], 780.0), 765.0);
        assert_eq!(window_start(&[], 10.0), 0.0);
    }

    /// The x axis spans the recent hours, labelled on the platform's clock: an hour of work in
    /// the afternoon fills the chart instead of a sliver at the right edge of the day.
    #[test]
    fn the_chart_shows_the_recent_hours_on_the_platforms_clock() {
        // 05:00 UTC is 13:00 GMT+8: the window is 10:00 to 13:00.
        let now = "2026-12-01T05:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let svg = burn_svg(
            "taobao.item_add",
            day_start(now),
            now,
            &[(600.0, 10.0), (720.0, 500.0), (779.0, 5_000.0)],
            Some(1_000_000),
        )
        .unwrap();
        for tick in ["10:00", "11:30", "13:00"] {
            assert!(svg.contains(&format!("\n{tick}\n")), "no {tick}: {svg}");
        }
        assert!(!svg.contains(">00:00<"), "the whole day drawn: {svg}");
        assert!(svg.contains("GMT+8"));
    }
}
