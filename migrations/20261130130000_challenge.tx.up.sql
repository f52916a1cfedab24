-- The challenge before a purchase and the operator's brake (issue #13).
-- challenge: what a buyer solves first; pow_bits: the proof of work's
-- difficulty; brake: a ceiling on admissions a second (0: none). Redis holds
-- a copy beside the campaign (its guard hash), written on every warm and
-- rebuild from these columns.
ALTER TABLE seckill_campaign
    ADD COLUMN challenge text NOT NULL DEFAULT 'NONE'
        CONSTRAINT seckill_campaign_challenge_check CHECK (challenge IN ('NONE', 'QUIZ', 'PROOF_OF_WORK')),
    ADD COLUMN pow_bits integer NOT NULL DEFAULT 0
        CONSTRAINT seckill_campaign_pow_bits_check CHECK (pow_bits BETWEEN 0 AND 32),
    ADD COLUMN brake integer NOT NULL DEFAULT 0
        CONSTRAINT seckill_campaign_brake_check CHECK (brake BETWEEN 0 AND 1000000);

--bun:split

-- A campaign's quiz: questions with the answers they accept (normalized:
-- lower case, single spaces). A buyer gets one at random.
CREATE TABLE campaign_quiz (
    voucher_id bigint  NOT NULL REFERENCES seckill_campaign (voucher_id) ON DELETE CASCADE,
    position   integer NOT NULL CONSTRAINT campaign_quiz_position_check CHECK (position >= 0),
    question   text    NOT NULL CONSTRAINT campaign_quiz_question_check CHECK (length(question) BETWEEN 1 AND 500),
    answers    text[]  NOT NULL CONSTRAINT campaign_quiz_answers_check CHECK (cardinality(answers) BETWEEN 1 AND 10),
    PRIMARY KEY (voucher_id, position)
);
