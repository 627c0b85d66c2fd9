"""What a measurement is: the records that flow between the stages (``records``), RequestRecords ->
LevelResult (``metrics``), and LevelResults -> objective values and constraint violations
(``objectives``, with the one condition grammar). Pure functions over frozen records."""
