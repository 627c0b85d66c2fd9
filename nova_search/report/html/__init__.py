"""The report as one self-contained HTML file: plotly figures drawn from ``report.data`` records, the
same data as HTML tables, and plain sentences wherever data is missing. One module per concept:

- ``parts``: what a section is made of (``Part``, ``Section``: typed, drawn by the templates);
- ``plots``: the report's figures, each from ``ReportData`` alone;
- ``sections``: the sections in order (``SECTIONS``), each a function from ``ReportData`` to a ``Section``;
- ``render``: the page (``render_html``, the templates in ``report/templates``) and ``write_report``.
"""
