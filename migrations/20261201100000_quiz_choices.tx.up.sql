-- The choices of a quiz question (issue: quiz choices). A question may list
-- the choices a buyer picks from, shown in a fresh order with each
-- challenge; its accepted answers are among them, at most a quarter of
-- them, so that one token guesses right at most one time in four (the
-- domain checks the rest). None (the default) is a free answer.
ALTER TABLE campaign_quiz
    ADD COLUMN choices text[] NOT NULL DEFAULT '{}'
        CONSTRAINT campaign_quiz_choices_check CHECK (cardinality(choices) = 0 OR cardinality(choices) BETWEEN 4 AND 10);
