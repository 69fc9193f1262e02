//! Charts drawn on the server as plain SVG (bars, stacked or side by side; lines; a
//! histogram), so they are readable before, and without, the wasm bundle. Every chart has
//! a title, axes with tick labels and its unit, a legend, and a `<title>` tooltip on each
//! mark stating its exact figure. Labels are rendered as text nodes, never as markup. A
//! mark may link somewhere (the runs behind a bar): an SVG `<a>` around it.

use domain::trends::Series;
use leptos::prelude::*;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = WIDTH - 16.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = HEIGHT - 48.0;
/// The height of one more row of legend.
const LEGEND_ROW: f64 = 16.0;

/// What the y values measure: decides the axis caption and how figures are written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// A count of things, named by the plural noun ("runs", "calls").
    Count(&'static str),
    Usd,
    Percent,
}

impl Unit {
    pub fn caption(self) -> &'static str {
        match self {
            Unit::Count(noun) => noun,
            Unit::Usd => "USD",
            Unit::Percent => "%",
        }
    }

    /// A figure with its unit, as tooltips and the legend state it.
    pub fn format(self, v: f64) -> String {
        match self {
            // The nouns are regular plurals: "1 run", "2 runs".
            Unit::Count(noun) if v.round() == 1.0 => format!("1 {}", noun.strip_suffix('s').unwrap_or(noun)),
            Unit::Count(noun) => format!("{} {noun}", v.round() as i64),
            Unit::Usd => format!("{} USD", usd(v)),
            Unit::Percent => format!("{v:.1} %"),
        }
    }

    fn integer(self) -> bool {
        matches!(self, Unit::Count(_))
    }
}

/// Dollars with enough places that small per-run costs do not all read 0.00.
pub fn usd(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// Round-number y ticks from 0 to at least `max`: steps of 1, 2 or 5 times a power of ten,
/// about four of them. Counts never get fractional steps. An all-zero chart gets 0 and 1,
/// so its axis is still drawn.
pub fn nice_ticks(max: f64, integer: bool) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 { max } else { 1.0 };
    let raw = max / 4.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = match raw / magnitude {
        n if n <= 1.0 => 1.0,
        n if n <= 2.0 => 2.0,
        n if n <= 5.0 => 5.0,
        _ => 10.0,
    } * magnitude;
    let step = if integer { step.max(1.0) } else { step };
    let count = (max / step - 1e-9).ceil().max(1.0) as usize;
    (0..=count).map(|k| k as f64 * step).collect()
}

/// How many decimals tick labels need for `ticks` to read distinct.
fn tick_decimals(ticks: &[f64]) -> usize {
    let step = ticks.get(1).copied().unwrap_or(1.0);
    if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil() as usize
    }
}

/// The x axis: one slot per bucket or bin, with a label under some of them, a tooltip
/// title for each, and a caption.
#[derive(Debug, Clone, PartialEq)]
pub struct XAxis {
    pub labels: Vec<Option<String>>,
    pub titles: Vec<String>,
    pub caption: String,
}

impl XAxis {
    fn slot(&self) -> f64 {
        (RIGHT - LEFT) / self.labels.len().max(1) as f64
    }

    fn centre(&self, i: usize) -> f64 {
        LEFT + (i as f64 + 0.5) * self.slot()
    }
}

/// The colour of a series: fixed for the terminal reasons (matching their badges), else
/// by position.
pub fn colour(key: &str, index: usize) -> &'static str {
    const PALETTE: [&str; 8] = ["#2454d6", "#b42318", "#a05a00", "#1f7a3d", "#6d28d9", "#0e7490", "#be185d", "#64748b"];
    match key {
        "completed" => "#1f7a3d",
        "step_limit" => "#a05a00",
        "budget" => "#d99a2b",
        "error" => "#b42318",
        "escalated" => "#6d28d9",
        "running" => "#60a5fa",
        k if k.ends_with("-none") => "#cbd5e1",
        k if k.ends_with("-other") => "#94a3b8",
        _ => PALETTE[index % PALETTE.len()],
    }
}

fn y_of(v: f64, top: f64) -> f64 {
    BOTTOM - (v / top) * (BOTTOM - TOP)
}

fn f(v: f64) -> String {
    format!("{v:.1}")
}

/// One legend entry: colour swatch (or none, for a plain note) and text.
struct LegendItem {
    key: String,
    colour: Option<&'static str>,
    text: String,
}

fn legend_for(series: &[Series], unit: Unit) -> Vec<LegendItem> {
    series
        .iter()
        .enumerate()
        .map(|(i, s)| LegendItem {
            key: s.key.clone(),
            colour: Some(colour(&s.key, i)),
            text: match s.summary {
                Some(v) => format!("{}: {}", s.label, unit.format(v)),
                None => format!("{}: none", s.label),
            },
        })
        .collect()
}

/// The frame every chart shares: the `<svg>` with its accessible name, gridlines and y
/// tick labels, x tick labels, both axis captions and the legend; `marks` are drawn on top.
fn frame(
    title: String,
    testid: &'static str,
    unit: Unit,
    ticks: Vec<f64>,
    x: &XAxis,
    legend: Vec<LegendItem>,
    marks: AnyView,
) -> impl IntoView {
    let top = ticks.last().copied().unwrap_or(1.0);
    let decimals = tick_decimals(&ticks);
    let label = format!("{title}. {}", legend.iter().map(|l| l.text.as_str()).collect::<Vec<_>>().join("; "));
    let y_ticks = ticks
        .into_iter()
        .map(|t| {
            let y = f(y_of(t, top));
            view! {
                <line class="grid" x1=f(LEFT) x2=f(RIGHT) y1=y.clone() y2=y.clone()/>
                <text class="tick y" x=f(LEFT - 6.0) y=y text-anchor="end" dominant-baseline="middle">
                    {format!("{t:.decimals$}")}
                </text>
            }
        })
        .collect_view();
    let x_ticks = x
        .labels
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.clone().map(|l| (i, l)))
        .map(|(i, l)| {
            let cx = f(x.centre(i));
            view! {
                <line class="axis" x1=cx.clone() x2=cx.clone() y1=f(BOTTOM) y2=f(BOTTOM + 4.0)/>
                <text class="tick x" x=cx y=f(BOTTOM + 16.0) text-anchor="middle">{l}</text>
            }
        })
        .collect_view();
    // Legend items left to right, wrapping onto more rows (the plot moves down by them).
    let mut at = LEFT;
    let mut row = 0.0;
    let mut placed = Vec::new();
    for item in legend {
        // Text width estimated at 6 px a character (11 px type); the SVG scales, the guess holds.
        let width = item.text.chars().count() as f64 * 6.0 + if item.colour.is_some() { 30.0 } else { 16.0 };
        if at > LEFT && at + width > RIGHT + 8.0 {
            at = LEFT;
            row += 1.0;
        }
        placed.push((at, row * LEGEND_ROW, item));
        at += width;
    }
    let extra = row * LEGEND_ROW;
    let legend = placed
        .into_iter()
        .map(|(x0, dy, item)| {
            let text_x = if item.colour.is_some() { x0 + 14.0 } else { x0 };
            view! {
                <g class="legend-item" data-series=item.key>
                    {item.colour.map(|c| view! { <rect x=f(x0) y=f(8.0 + dy) width="10" height="10" rx="2" fill=c/> })}
                    <text x=f(text_x) y=f(17.0 + dy)>{item.text}</text>
                </g>
            }
        })
        .collect_view();
    view! {
        <svg
            class="chart"
            data-testid=testid
            role="img"
            aria-label=label
            viewBox=format!("0 0 {WIDTH} {}", HEIGHT + extra)
            preserveAspectRatio="xMinYMin meet"
            xmlns="http://www.w3.org/2000/svg"
        >
            <title>{title}</title>
            <g class="legend">{legend}</g>
            <g class="plot" transform=format!("translate(0 {})", f(extra))>
                <g class="y-axis">{y_ticks}</g>
                <text class="caption y" x="12" y=f((TOP + BOTTOM) / 2.0) text-anchor="middle"
                    transform=format!("rotate(-90 12 {})", f((TOP + BOTTOM) / 2.0))>
                    {unit.caption()}
                </text>
                <g class="marks">{marks}</g>
                <line class="axis" x1=f(LEFT) x2=f(RIGHT) y1=f(BOTTOM) y2=f(BOTTOM)/>
                <line class="axis" x1=f(LEFT) x2=f(LEFT) y1=f(TOP) y2=f(BOTTOM)/>
                <g class="x-axis">{x_ticks}</g>
                <text class="caption x" x=f((LEFT + RIGHT) / 2.0) y=f(HEIGHT - 8.0) text-anchor="middle">
                    {x.caption.clone()}
                </text>
            </g>
        </svg>
    }
}

/// A bar's height in pixels: at least 2 for any non-zero value, so a single run in the
/// tail of a distribution is still visible next to thousands.
fn bar_height(v: f64, top: f64) -> f64 {
    let h = v / top * (BOTTOM - TOP);
    if v > 0.0 {
        h.max(2.0)
    } else {
        0.0
    }
}

/// Where mark `i` of series `k` links, if anywhere: `links[k][i]`.
fn link_of(links: &[Vec<Option<String>>], k: usize, i: usize) -> Option<String> {
    links.get(k).and_then(|l| l.get(i)).cloned().flatten()
}

/// `mark` wrapped in an SVG link to `href` (the `<g>` makes the `<a>` an SVG one).
fn linked(href: Option<String>, mark: AnyView) -> AnyView {
    match href {
        Some(href) => view! { <g class="mark-link"><a href=href>{mark}</a></g> }.into_any(),
        None => mark,
    }
}

/// Values per bucket, one bar per series side by side, or (`stacked`) one bar per bucket
/// split by series. With `links` (per series, per bucket), a bar opens what it counts.
#[component]
pub fn BarChart(
    #[prop(into)] title: String,
    testid: &'static str,
    unit: Unit,
    x: XAxis,
    series: Vec<Series>,
    #[prop(optional)] stacked: bool,
    #[prop(optional)] links: Vec<Vec<Option<String>>>,
) -> impl IntoView {
    let n = x.labels.len();
    let value = |s: &Series, i: usize| s.values.get(i).copied().flatten().unwrap_or(0.0);
    let max = if stacked {
        (0..n).map(|i| series.iter().map(|s| value(s, i)).sum::<f64>()).fold(0.0, f64::max)
    } else {
        series.iter().flat_map(|s| s.values.iter().map(|v| v.unwrap_or(0.0))).fold(0.0, f64::max)
    };
    let ticks = nice_ticks(max, unit.integer());
    let top = ticks.last().copied().unwrap_or(1.0);
    let slot = x.slot();
    let mut rects = Vec::new();
    for i in 0..n {
        let mut base = BOTTOM;
        let width = if stacked { slot * 0.8 } else { slot * 0.8 / series.len().max(1) as f64 };
        for (k, s) in series.iter().enumerate() {
            let v = value(s, i);
            if v <= 0.0 {
                continue;
            }
            let h = bar_height(v, top);
            let left = if stacked { x.centre(i) - width / 2.0 } else { x.centre(i) - slot * 0.4 + width * k as f64 };
            let y = base - h;
            if stacked {
                base = y;
            }
            let href = link_of(&links, k, i);
            let tip = format!(
                "{}: {} {}{}",
                x.titles.get(i).cloned().unwrap_or_default(),
                s.label,
                unit.format(v),
                if href.is_some() { " (open the runs)" } else { "" }
            );
            let rect = view! {
                <rect class="bar" x=f(left) y=f(y) width=f(width) height=f(h) fill=colour(&s.key, k)
                    data-series=s.key.clone() data-bucket=i data-value=v.to_string()>
                    <title>{tip}</title>
                </rect>
            };
            rects.push(linked(href, rect.into_any()));
        }
    }
    let legend = legend_for(&series, unit);
    frame(title, testid, unit, ticks, &x, legend, rects.collect_view().into_any())
}

/// One line per series across the buckets; buckets without a value are gaps, and every
/// measured point has a dot with its figure as tooltip (and, with `links`, a link).
#[component]
pub fn LineChart(
    #[prop(into)] title: String,
    testid: &'static str,
    unit: Unit,
    x: XAxis,
    series: Vec<Series>,
    #[prop(optional)] links: Vec<Vec<Option<String>>>,
) -> impl IntoView {
    let max = series.iter().flat_map(|s| s.values.iter().flatten().copied()).fold(0.0, f64::max);
    let ticks = nice_ticks(max, unit.integer());
    let top = ticks.last().copied().unwrap_or(1.0);
    let mut marks = Vec::new();
    for (k, s) in series.iter().enumerate() {
        let c = colour(&s.key, k);
        // Contiguous runs of measured buckets, each drawn as one polyline.
        let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for (i, v) in s.values.iter().enumerate() {
            match v {
                Some(v) => segments.last_mut().unwrap().push((x.centre(i), y_of(*v, top))),
                None if segments.last().is_some_and(|seg| !seg.is_empty()) => segments.push(Vec::new()),
                None => {}
            }
        }
        for seg in segments.into_iter().filter(|seg| seg.len() > 1) {
            let points = seg.iter().map(|(px, py)| format!("{},{}", f(*px), f(*py))).collect::<Vec<_>>().join(" ");
            marks.push(
                view! { <polyline class="line" points=points fill="none" stroke=c stroke-width="2" data-series=s.key.clone()/> }
                    .into_any(),
            );
        }
        for (i, v) in s.values.iter().enumerate() {
            let Some(v) = *v else { continue };
            let href = link_of(&links, k, i);
            let tip = format!(
                "{}: {} {}{}",
                x.titles.get(i).cloned().unwrap_or_default(),
                s.label,
                unit.format(v),
                if href.is_some() { " (open the runs)" } else { "" }
            );
            // A linked point is a larger target than the 3 px dot.
            let r = if href.is_some() { "4" } else { "3" };
            let dot = view! {
                <circle class="dot" cx=f(x.centre(i)) cy=f(y_of(v, top)) r=r fill=c
                    data-series=s.key.clone() data-bucket=i data-value=v.to_string()>
                    <title>{tip}</title>
                </circle>
            };
            marks.push(linked(href, dot.into_any()));
        }
    }
    let legend = legend_for(&series, unit);
    frame(title, testid, unit, ticks, &x, legend, marks.collect_view().into_any())
}

/// A histogram: one bar per bin with its count written above it (so a bar 2 px high still
/// states its runs), and `notes` (such as p99 and the maximum) in the legend.
#[component]
pub fn HistogramChart(
    #[prop(into)] title: String,
    testid: &'static str,
    unit: Unit,
    x: XAxis,
    counts: Vec<u64>,
    #[prop(into)] series_label: String,
    notes: Vec<String>,
) -> impl IntoView {
    let max = counts.iter().copied().max().unwrap_or(0) as f64;
    let ticks = nice_ticks(max, true);
    let top = ticks.last().copied().unwrap_or(1.0);
    let width = x.slot() * 0.8;
    let c = colour("", 0);
    let bars = counts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, &n)| {
            let v = n as f64;
            let h = bar_height(v, top);
            let tip = format!("{}: {}", x.titles.get(i).cloned().unwrap_or_default(), unit.format(v));
            view! {
                <rect class="bar" x=f(x.centre(i) - width / 2.0) y=f(BOTTOM - h) width=f(width) height=f(h) fill=c
                    data-series="runs" data-bin=x.titles.get(i).cloned().unwrap_or_default() data-value=n>
                    <title>{tip}</title>
                </rect>
                <text class="bar-value" x=f(x.centre(i)) y=f(BOTTOM - h - 4.0) text-anchor="middle">{n}</text>
            }
        })
        .collect_view();
    let total: u64 = counts.iter().sum();
    let mut legend = vec![LegendItem {
        key: "runs".into(),
        colour: Some(c),
        text: format!("{series_label}: {}", unit.format(total as f64)),
    }];
    legend.extend(notes.into_iter().map(|text| LegendItem { key: "note".into(), colour: None, text }));
    frame(title, testid, unit, ticks, &x, legend, bars.into_any())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_maximum() {
        assert_eq!(nice_ticks(0.0, true), vec![0.0, 1.0]);
        assert_eq!(nice_ticks(3.0, true), vec![0.0, 1.0, 2.0, 3.0]);
        assert_eq!(nice_ticks(17.0, true), vec![0.0, 5.0, 10.0, 15.0, 20.0]);
        assert_eq!(nice_ticks(100.0, false), vec![0.0, 50.0, 100.0]);
        assert_eq!(nice_ticks(1234.0, true), vec![0.0, 500.0, 1000.0, 1500.0]);
        let cost = nice_ticks(0.042, false);
        assert!(*cost.last().unwrap() >= 0.042 && cost.len() <= 6, "{cost:?}");
        assert_eq!(tick_decimals(&cost), 2);
        assert_eq!(tick_decimals(&nice_ticks(17.0, true)), 0);
    }

    #[test]
    fn figures_carry_their_unit() {
        assert_eq!(Unit::Count("runs").format(12.0), "12 runs");
        assert_eq!(Unit::Count("escalations").format(1.0), "1 escalation");
        assert_eq!(Unit::Count("runs").format(0.0), "0 runs");
        assert_eq!(Unit::Usd.format(0.04213), "0.0421 USD");
        assert_eq!(Unit::Usd.format(12.5), "12.50 USD");
        assert_eq!(Unit::Percent.format(12.345), "12.3 %");
        assert_eq!(Unit::Percent.caption(), "%");
    }

    #[test]
    fn tail_bars_stay_visible() {
        assert_eq!(bar_height(0.0, 1000.0), 0.0);
        assert_eq!(bar_height(1.0, 100_000.0), 2.0);
        assert!((bar_height(500.0, 1000.0) - (BOTTOM - TOP) / 2.0).abs() < 1e-9);
    }
}
