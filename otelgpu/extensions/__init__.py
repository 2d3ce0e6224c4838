"""Extensions shipped with the agent."""
