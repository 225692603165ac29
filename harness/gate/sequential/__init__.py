"""The sequential gate: a run's requests judged in send order with anytime-valid intervals
(confidence sequences), so the verdict may be looked at after every request and the replay
stopped as soon as it is known (`replay --until-decided`, `gate --sequential`)."""
