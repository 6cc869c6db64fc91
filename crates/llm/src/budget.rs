//! Token and cost accounting against the per-minute and per-day budgets.
//!
//! The minute window slides: it sums the calls recorded in the last 60 seconds (one entry per
//! call, dropped as they age out). The day window is the current UTC calendar day and resets at
//! 00:00 UTC, matching how providers bill. The check happens before a call from what is already
//! recorded; calls in flight are not counted, so concurrent calls can overshoot a limit by at
//! most `concurrency` replies of `max_tokens` each. Counters live in memory: a restart starts
//! them from zero.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::config::{BudgetConfig, Limit};
use crate::outcome::{BudgetResource, BudgetWindow, Outcome, Usage};

const MINUTE: Duration = Duration::from_secs(60);

/// What one call spent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Spend {
    tokens: u64,
    usd: f64,
}

/// Accounting state; the client keeps it behind a mutex.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    minute: VecDeque<(Instant, Spend)>,
    day: u64,
    day_spend: Spend,
}

/// The current UTC day number (days since 1970-01-01).
pub(crate) fn utc_day(now: SystemTime) -> u64 {
    now.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0)
}

impl Ledger {
    fn roll(&mut self, now: Instant, day: u64) {
        while let Some(&(t, _)) = self.minute.front() {
            if now.saturating_duration_since(t) >= MINUTE {
                self.minute.pop_front();
            } else {
                break;
            }
        }
        if day != self.day {
            self.day = day;
            self.day_spend = Spend::default();
        }
    }

    fn minute_spend(&self) -> Spend {
        self.minute
            .iter()
            .fold(Spend::default(), |acc, (_, s)| Spend {
                tokens: acc.tokens.saturating_add(s.tokens),
                usd: acc.usd + s.usd,
            })
    }

    /// `Some(BudgetExhausted)` when a configured limit is already reached.
    pub(crate) fn check(&mut self, cfg: &BudgetConfig, now: Instant, day: u64) -> Option<Outcome> {
        self.roll(now, day);
        let windows = [
            (BudgetWindow::Minute, cfg.per_minute, self.minute_spend()),
            (BudgetWindow::Day, cfg.per_day, self.day_spend),
        ];
        for (window, limit, spent) in windows {
            let Some(Limit { tokens, usd }) = limit else {
                continue;
            };
            if let Some(limit) = tokens
                && spent.tokens >= limit
            {
                return Some(Outcome::BudgetExhausted {
                    window,
                    resource: BudgetResource::Tokens,
                    limit: limit as f64,
                    used: spent.tokens as f64,
                });
            }
            if let Some(limit) = usd
                && spent.usd >= limit
            {
                return Some(Outcome::BudgetExhausted {
                    window,
                    resource: BudgetResource::Usd,
                    limit,
                    used: spent.usd,
                });
            }
        }
        None
    }

    /// Record a call's usage and cost (an unknown cost counts as 0 USD; configuration refuses
    /// a USD budget for a model without a price).
    pub(crate) fn record(&mut self, usage: Usage, cost: Option<f64>, now: Instant, day: u64) {
        self.roll(now, day);
        let s = Spend {
            tokens: usage.total(),
            usd: cost.unwrap_or(0.0),
        };
        self.minute.push_back((now, s));
        self.day_spend.tokens = self.day_spend.tokens.saturating_add(s.tokens);
        self.day_spend.usd += s.usd;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(minute_tokens: Option<u64>, day_usd: Option<f64>) -> BudgetConfig {
        BudgetConfig {
            per_minute: Some(Limit {
                tokens: minute_tokens,
                usd: None,
            }),
            per_day: Some(Limit {
                tokens: None,
                usd: day_usd,
            }),
        }
    }

    fn usage(n: u64) -> Usage {
        Usage {
            input_tokens: n,
            output_tokens: 0,
        }
    }

    #[test]
    fn minute_window_slides() {
        let c = cfg(Some(100), None);
        let mut l = Ledger::default();
        let t0 = Instant::now();
        assert_eq!(l.check(&c, t0, 5), None);
        l.record(usage(60), None, t0, 5);
        assert_eq!(l.check(&c, t0, 5), None);
        l.record(usage(40), None, t0 + Duration::from_secs(30), 5);
        match l.check(&c, t0 + Duration::from_secs(59), 5) {
            Some(Outcome::BudgetExhausted {
                window: BudgetWindow::Minute,
                resource: BudgetResource::Tokens,
                limit,
                used,
            }) => {
                assert_eq!(limit, 100.0);
                assert_eq!(used, 100.0);
            }
            other => panic!("{other:?}"),
        }
        // The first entry ages out at t0 + 60 s.
        assert_eq!(l.check(&c, t0 + Duration::from_secs(60), 5), None);
    }

    #[test]
    fn day_window_resets_at_utc_midnight() {
        let c = cfg(None, Some(1.0));
        let mut l = Ledger::default();
        let t0 = Instant::now();
        l.record(usage(1), Some(0.7), t0, 5);
        assert_eq!(l.check(&c, t0, 5), None);
        l.record(usage(1), Some(0.4), t0, 5);
        assert!(matches!(
            l.check(&c, t0, 5),
            Some(Outcome::BudgetExhausted {
                window: BudgetWindow::Day,
                resource: BudgetResource::Usd,
                ..
            })
        ));
        assert_eq!(l.check(&c, t0, 6), None);
    }

    #[test]
    fn utc_day_number() {
        let t = UNIX_EPOCH + Duration::from_secs(86_400 * 3 + 5);
        assert_eq!(utc_day(t), 3);
    }
}
