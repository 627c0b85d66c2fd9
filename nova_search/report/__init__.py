"""The study report: ``data`` (pure tables from StudyResults) and ``html`` (plotly figures from them,
one self-contained HTML file)."""

from nova_search.report.data import ReportData, build_report_data

__all__ = ["ReportData", "build_report_data"]
