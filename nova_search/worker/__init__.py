"""The worker side: the loop that asks, runs and tells a trial per slot, with its heartbeats
(``loop``); asking within the budget under the budget lock (``ask``); telling the outcome, retried, with
signals deferred (``tell``); the measured levels written to nova's table (``sink``); moving from one
stage of a study to the next (``stage_loop``); and one worker per GPU group of a node (``node``). Which
trial fits which of a worker's GPUs is ``search.placement``."""
