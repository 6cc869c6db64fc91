//! The agent-trace replay (issue 36): the embedded set loads and is well formed, the replay
//! decides each trace as the proxy would, and the figures add up.

mod replay;
