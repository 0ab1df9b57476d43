//! The report's charts: bar charts as inline SVG, drawn by plotters.
//!
//! Data bars are filled rectangles in fixed colours that read on light and
//! dark backgrounds; text, axes and grid lines are drawn black and recoloured
//! by the page's stylesheet (`svg text`, `svg line`…), so one SVG serves both
//! colour schemes. Every label is the caller's and is escaped by plotters'
//! SVG backend.

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Bar colours: kept pairs and documents (blue), near misses and
/// duplicates (orange), the threshold (red).
pub const BLUE: RGBColor = RGBColor(0x3b, 0x82, 0xc4);
pub const ORANGE: RGBColor = RGBColor(0xe0, 0x8a, 0x2c);
pub const RED: RGBColor = RGBColor(0xd0, 0x3a, 0x3a);

const WIDTH: u32 = 640;
const HEIGHT: u32 = 260;
const FONT: &str = "sans-serif";

/// One series of bars over the chart's categories.
pub struct Series<'a> {
    pub color: RGBColor,
    pub values: &'a [f64],
}

/// A vertical bar chart over categories.
pub struct Bars<'a> {
    /// One label per category; empty labels are not drawn (crowded axes).
    pub labels: &'a [String],
    pub series: &'a [Series<'a>],
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    /// Bars grow from 1 on a logarithmic axis.
    pub log_y: bool,
    /// A vertical marker before this category (a threshold).
    pub marker: Option<f64>,
    /// Series drawn over each other at full width (series that never share
    /// a category), rather than side by side.
    pub overlay: bool,
}

type Error = String;

fn failed<E: std::fmt::Debug>(e: E) -> Error {
    format!("cannot draw a chart: {e:?}")
}

fn area(svg: &mut String, height: u32) -> DrawingArea<SVGBackend<'_>, Shift> {
    SVGBackend::with_string(svg, (WIDTH, height)).into_drawing_area()
}

/// The x position of category `i` and the width of one series' bar in it.
fn slot(i: usize, series: usize, of: usize) -> (f64, f64) {
    let width = 0.8 / of as f64;
    (i as f64 - 0.4 + series as f64 * width, width)
}

fn label_at(labels: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    labels.get(i as usize).cloned().unwrap_or_default()
}

impl Bars<'_> {
    fn top(&self) -> f64 {
        let max = self.series.iter().flat_map(|s| s.values.iter().copied()).fold(0.0, f64::max);
        if self.log_y {
            (max * 2.0).max(10.0)
        } else {
            (max * 1.1).max(1.0)
        }
    }

    /// The chart as an SVG document.
    pub fn svg(&self) -> Result<String, Error> {
        let mut svg = String::new();
        {
            let root = area(&mut svg, HEIGHT);
            let n = self.labels.len().max(1) as f64;
            let mut builder = ChartBuilder::on(&root);
            builder.margin(10).x_label_area_size(36).y_label_area_size(64);
            let x = -0.6..n - 0.4;
            if self.log_y {
                let mut chart = builder.build_cartesian_2d(x, (1.0..self.top()).log_scale()).map_err(failed)?;
                self.mesh(&mut chart)?;
                self.draw(&mut chart, 1.0)?;
            } else {
                let mut chart = builder.build_cartesian_2d(x, 0.0..self.top()).map_err(failed)?;
                self.mesh(&mut chart)?;
                self.draw(&mut chart, 0.0)?;
            }
            root.present().map_err(failed)?;
        }
        Ok(svg)
    }

    fn mesh<'b, Y>(&self, chart: &mut ChartContext<'b, SVGBackend<'b>, Cartesian2d<RangedCoordf64, Y>>) -> Result<(), Error>
    where
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let labels = self.labels;
        let formatter = |x: &f64| label_at(labels, *x);
        let y_formatter = |y: &f64| format_count(*y);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(labels.len().clamp(1, 60))
            .x_label_formatter(&formatter)
            .y_label_formatter(&y_formatter)
            .y_labels(6)
            .x_desc(self.x_desc)
            .y_desc(self.y_desc)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()
            .map_err(failed)
    }

    fn draw<'b, Y>(&self, chart: &mut ChartContext<'b, SVGBackend<'b>, Cartesian2d<RangedCoordf64, Y>>, base: f64) -> Result<(), Error>
    where
        Y: Ranged<ValueType = f64>,
    {
        let of = if self.overlay { 1 } else { self.series.len().max(1) };
        for (s, series) in self.series.iter().enumerate() {
            let s = if self.overlay { 0 } else { s };
            let bars = series.values.iter().enumerate().filter(|(_, v)| **v > base).map(|(i, v)| {
                let (x, w) = slot(i, s, of);
                Rectangle::new([(x, base), (x + w, *v)], series.color.filled())
            });
            chart.draw_series(bars).map_err(failed)?;
        }
        if let Some(m) = self.marker {
            let (low, high) = (chart.y_range().start, chart.y_range().end);
            let line = Rectangle::new([(m - 0.5 - 0.03, low), (m - 0.5 + 0.03, high)], RED.filled());
            chart.draw_series(std::iter::once(line)).map_err(failed)?;
        }
        Ok(())
    }
}

/// Horizontal bars, one per labelled row (stage timings).
pub fn horizontal(labels: &[String], values: &[f64], x_desc: &str) -> Result<String, Error> {
    let mut svg = String::new();
    {
        let height = 40 + 26 * labels.len().max(1) as u32;
        let root = area(&mut svg, height);
        let n = labels.len().max(1) as f64;
        let max = values.iter().copied().fold(0.0, f64::max).max(0.01) * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(120)
            .build_cartesian_2d(0.0..max, -0.6..n - 0.4)
            .map_err(failed)?;
        // Row 0 at the top, as the stages ran.
        let row = |i: usize| n - 1.0 - i as f64;
        let formatter = |y: &f64| label_at(labels, n - 1.0 - *y);
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(labels.len().clamp(1, 60))
            .y_label_formatter(&formatter)
            .x_label_formatter(&|x: &f64| format_count(*x))
            .x_desc(x_desc)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()
            .map_err(failed)?;
        let bars = values.iter().enumerate().map(|(i, v)| Rectangle::new([(0.0, row(i) - 0.35), (*v, row(i) + 0.35)], BLUE.filled()));
        chart.draw_series(bars).map_err(failed)?;
        root.present().map_err(failed)?;
    }
    Ok(svg)
}

/// Axis numbers: whole counts with thousands kept short.
fn format_count(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else if a < 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_chart_is_one_svg_with_a_bar_per_nonzero_value() {
        let labels: Vec<String> = ["0", "1", "2", "3"].iter().map(|s| s.to_string()).collect();
        let values = [5.0, 0.0, 2.0, 1.0];
        let bars = Bars { labels: &labels, series: &[Series { color: BLUE, values: &values }], x_desc: "d", y_desc: "pairs", log_y: false, marker: None, overlay: false };
        let svg = bars.svg().unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        let blue = svg.matches("fill=\"#3B82C4\"").count();
        assert_eq!(blue, 3, "{svg}");
    }

    #[test]
    fn log_bars_and_markers_draw() {
        let labels: Vec<String> = ["2", "3-4", "5-8"].iter().map(|s| s.to_string()).collect();
        let values = [1000.0, 10.0, 1.0];
        let bars = Bars { labels: &labels, series: &[Series { color: BLUE, values: &values }], x_desc: "size", y_desc: "clusters", log_y: true, marker: Some(1.0), overlay: false };
        let svg = bars.svg().unwrap();
        assert!(svg.contains("fill=\"#D03A3A\""), "the marker is drawn");
        assert!(svg.lines().any(|l| l.trim() == "3-4"), "labels at the bars");
    }

    #[test]
    fn numbers_stay_short() {
        assert_eq!(format_count(1_500_000.0), "1.5M");
        assert_eq!(format_count(25_000.0), "25k");
        assert_eq!(format_count(7.0), "7");
        assert_eq!(format_count(0.05), "0.05");
    }
}
