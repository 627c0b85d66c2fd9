"""Presentation: ``data`` (pure tables from StudyResults), ``html`` (plotly figures and tables from
them, one self-contained HTML file), ``dashboard`` (the study as optuna-dashboard shows it: notes,
graphs, writing them, serving), ``status``, ``progress``, ``policy`` (the deploy answer in words)."""

from nova_search.report.data import ReportData, build_report_data

__all__ = ["ReportData", "build_report_data"]
