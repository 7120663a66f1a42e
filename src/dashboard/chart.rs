//! Today's burn curve of one gate as an SVG: calls counted so far against the share of the
//! daily quota the elapsed part of the day allows (above the line, the quota will not last).
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

/// The burn curve of `title`: `used` (cumulative calls per minute of the day), the quota's
/// fair share line when `quota` is known, and `now` as the right edge.
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
        let top_used = used.last().map_or(0.0, |p| p.1);
        let fair_now = quota.map_or(0.0, |q| q as f64 * elapsed / 1440.0);
        let y_max = (top_used.max(fair_now) * 1.15).max(10.0);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(24)
            .y_label_area_size(48)
            .build_cartesian_2d(0f64..elapsed.max(60.0), 0f64..y_max)
            .map_err(chart_err)?;
        chart
            .configure_mesh()
            .x_desc("minutes since 00:00 GMT+8")
            .x_labels(6)
            .y_labels(5)
            .draw()
            .map_err(chart_err)?;
        if let Some(q) = quota {
            let fair = vec![(0.0, 0.0), (elapsed, q as f64 * elapsed / 1440.0)];
            chart
                .draw_series(LineSeries::new(fair, &RGBColor(150, 150, 150)))
                .map_err(chart_err)?
                .label("fair share of the daily quota");
        }
        chart
            .draw_series(LineSeries::new(
                curve(used),
                RGBColor(200, 60, 40).stroke_width(2),
            ))
            .map_err(chart_err)?
            .label("calls today");
        root.present().map_err(chart_err)?;
    }
    Ok(svg)
}

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
}
