"""What teachers read: the misconception report, grade exports, feedback."""
